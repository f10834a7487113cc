"""Fair-share policies between tenants: VTC (default), FCFS and a request-rate limiter baseline."""

from control.core.tenancy.fairshare.base import FairSharePolicy
from control.core.tenancy.fairshare.registry import FAIR_SHARE_POLICIES, make_fair_share

__all__ = ["FAIR_SHARE_POLICIES", "FairSharePolicy", "make_fair_share"]
