"""The stale policy from the configuration file: one ``StalePolicy`` per ``[[watch]]``, with
per-format limits (docs/DESIGN.md, "Default stale policy"; docs/verdicts.md)."""

from __future__ import annotations

import pytest

from core import config
from core.defaults import DEFAULT_STALE_AFTER, FORMAT_STALE_AFTER
from core.errors import ConfigError
from core.stale_policy import StalePolicy


def test_default_spec_gives_the_default_policy() -> None:
    spec = config.WatchSpec("/tmp")
    assert spec.policy == StalePolicy()
    assert spec.policy.limit_for("sema") == DEFAULT_STALE_AFTER
    assert spec.policy.limit_for("af-ledger") == FORMAT_STALE_AFTER["af-ledger"]


def test_watch_table_carries_every_policy_key() -> None:
    cfg = config.loads(
        '[[watch]]\npath = "/tmp"\nstale_after = 600\nallow_emergency = true\n'
        'format_stale_after = { "af-ledger" = 5, sema = 120 }\n',
        strict=True,
    )
    policy = cfg.watches[0].policy
    assert policy.stale_after == 600.0
    assert policy.allow_emergency is True
    assert policy.allow_higher_privilege is False
    assert policy.limit_for("af-ledger") == 5.0
    assert policy.limit_for("sema") == 120.0
    assert policy.limit_for("task-mcp") == 600.0


def test_format_limits_survive_save_and_load(tmp_path) -> None:
    cfg = config.Config(watches=[config.WatchSpec(str(tmp_path), format_stale_after={"sema": 90})])
    path = config.save(cfg, str(tmp_path / "c.toml"))
    again = config.load_strict(path)
    assert again.watches[0].format_stale_after == {"sema": 90.0}
    assert again.watches[0].policy.limit_for("sema") == 90.0


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("stale_after = inf", "watch[1].stale_after"),
        ("stale_after = nan", "watch[1].stale_after"),
        ("stale_after = -5", "watch[1].stale_after"),
        ('format_stale_after = { "no-such" = 5 }', "watch[1].format_stale_after.no-such"),
        ("format_stale_after = { sema = inf }", "watch[1].format_stale_after.sema"),
        ("format_stale_after = 30", "watch[1].format_stale_after"),
    ],
)
def test_bad_limits_are_named_and_replaced_by_defaults(text: str, key: str) -> None:
    body = f'[[watch]]\npath = "/tmp"\n{text}\n'
    with pytest.raises(ConfigError) as err:
        config.loads(body, strict=True)
    assert err.value.key == key
    lenient = config.loads(body)
    assert any(key in w for w in lenient.warnings)
    assert lenient.watches[0].policy.stale_after == DEFAULT_STALE_AFTER
    assert lenient.watches[0].policy.limit_for("sema") == DEFAULT_STALE_AFTER


def test_ui_rescan_interval_must_be_finite() -> None:
    cfg = config.loads("[ui]\nrescan_interval = inf\n")
    assert cfg.ui.rescan_interval == config.DEFAULT_RESCAN_INTERVAL
    assert any("ui.rescan_interval" in w for w in cfg.warnings)
