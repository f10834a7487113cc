"""DTOs of the API: request and response bodies, apart from ORM rows and core types."""
