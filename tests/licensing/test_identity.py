"""The install identity: made once, kept 0600, stable across loads."""

from __future__ import annotations

import json

from luminal.licensing.identity import existing, load_or_create, machine_fingerprint


def test_identity_is_created_once_with_private_files(home) -> None:
    assert existing(home) is None
    first = load_or_create(home)
    for path in (home.install_key, home.install_info):
        assert path.stat().st_mode & 0o777 == 0o600
    assert home.root.stat().st_mode & 0o777 == 0o700
    again = load_or_create(home)
    assert again.keyid == first.keyid and again.fingerprint == first.fingerprint
    info = json.loads(home.install_info.read_text())
    assert info["keyid"] == first.keyid and "private" not in json.dumps(info).lower()
    assert len(first.fingerprint) == 32


def test_fingerprint_is_stable_and_depends_on_the_machine_id(tmp_path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "machine-id").write_text("aaaa\n")
    a = machine_fingerprint(tmp_path)
    assert a == machine_fingerprint(tmp_path)
    (tmp_path / "etc" / "machine-id").write_text("bbbb\n")
    assert machine_fingerprint(tmp_path) != a


def test_facts_come_from_the_probe_root(tmp_path, monkeypatch) -> None:
    """LUMINAL_HARDWARE_ROOT fakes the machine; the machine id is named by digest, not shown."""
    from luminal.licensing.identity import differences, machine_facts

    for name, mid in (("a", "aaaa"), ("b", "bbbb")):
        (tmp_path / name / "etc").mkdir(parents=True)
        (tmp_path / name / "etc" / "machine-id").write_text(mid)
    monkeypatch.setenv("LUMINAL_HARDWARE_ROOT", str(tmp_path / "a"))
    a = machine_facts()
    assert a == machine_facts(tmp_path / "a") and a.fingerprint == machine_fingerprint()
    monkeypatch.setenv("LUMINAL_HARDWARE_ROOT", str(tmp_path / "b"))
    b = machine_facts()
    assert a.fingerprint != b.fingerprint and "aaaa" not in a.machine_id
    (what,) = differences(a, b)
    assert what.startswith("machine id differs (recorded ")
