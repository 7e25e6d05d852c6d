"""`luminal-vendor`: keygen, issue, licensee (verify-report and audit: tests/vendor/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from luminal.licensing import dsse
from luminal.licensing.keys import read_public_key_file
from tests.helpers.licensing_helpers import Vendor, make_terms, vendor_cli


def test_keygen_writes_a_private_and_a_public_file(tmp_path: Path) -> None:
    prefix = tmp_path / "keys" / "vendor-2026"
    rc, out, err = vendor_cli("keygen", "-o", prefix)
    assert rc == 0, err
    private, public = Path(f"{prefix}.key"), Path(f"{prefix}.pub.json")
    assert private.stat().st_mode & 0o777 == 0o600
    assert b"PRIVATE KEY" in private.read_bytes() and b"PRIVATE" not in public.read_bytes()
    key = read_public_key_file(public)
    assert f"key {key.keyid}:" in out
    rc, _, err = vendor_cli("keygen", "-o", prefix)
    assert rc == 2 and "refusing to overwrite a signing key" in err


def test_issue_floating_from_terms(vendor: Vendor, tmp_path: Path) -> None:
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps(make_terms(targets=("cpu", "cuda")).to_json()))
    out = tmp_path / "floating.json"
    rc, stdout, err = vendor_cli(
        "issue", "-k", vendor.key_path, "--terms", terms, "--floating", "-o", out
    )
    assert rc == 0, err
    assert "(floating)" in stdout
    env = dsse.Envelope.loads(out.read_bytes())
    assert dsse.verify(env, {vendor.public.keyid: vendor.public.public_key}) == vendor.public.keyid
    claims = env.payload_json()
    assert claims["binding"] == {"mode": "floating"} and claims["entitlements"]["targets"] == [
        "cpu",
        "cuda",
    ]
    rc, _, err = vendor_cli("issue", "-k", vendor.key_path, "--terms", terms, "-o", out)
    assert rc == 2 and "exactly one of --request" in err
    rc, _, err = vendor_cli(
        "issue", "-k", tmp_path / "none.key", "--terms", terms, "--floating", "-o", out
    )
    assert rc == 2 and "no such file" in err


def test_licensee_add_and_list(tmp_path: Path) -> None:
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps(make_terms(licensee="globex").to_json()))
    db = f"sqlite:///{tmp_path / 'v.db'}"
    rc, out, err = vendor_cli(
        "licensee", "add", "globex", "--terms", terms, "--db", db, "--max-installs", "3"
    )
    assert rc == 0, err
    assert out.startswith("lk_")
    rc, _, err = vendor_cli("licensee", "add", "globex", "--terms", terms, "--db", db)
    assert rc == 2 and "already exists" in err
    rc, out, _ = vendor_cli("licensee", "list", "--db", db)
    assert rc == 0 and out.split("\t") == ["globex", "GLOBEX Corp", "0/3 installs\n"]


def test_artifact_add_registers_what_usage_may_be_billed_on(tmp_path: Path) -> None:
    import hashlib
    import sqlite3

    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps(make_terms(licensee="globex").to_json()))
    db = f"sqlite:///{tmp_path / 'v.db'}"
    assert vendor_cli("licensee", "add", "globex", "--terms", terms, "--db", db)[0] == 0
    artifact = tmp_path / "model.lmnl"
    artifact.write_bytes(b"an artifact's bytes")
    digest = "sha256:" + hashlib.sha256(artifact.read_bytes()).hexdigest()
    rc, out, err = vendor_cli("artifact", "add", "globex", artifact, "--db", db)
    assert rc == 0 and out.split() == ["globex", digest], err
    rc, _, err = vendor_cli("artifact", "add", "globex", digest, "--db", db)  # idempotent
    assert rc == 0, err
    with sqlite3.connect(tmp_path / "v.db") as conn:
        rows = conn.execute("SELECT licensee_id, digest FROM artifacts").fetchall()
    assert rows == [("globex", digest)]
    rc, _, err = vendor_cli("artifact", "add", "initech", digest, "--db", db)
    assert rc == 2 and "unknown licensee 'initech'" in err
    rc, _, err = vendor_cli("artifact", "add", "globex", "sha256:beef", "--db", db)
    assert rc == 2 and "neither an artifact file nor a digest" in err


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).parent / "luminal-vendor"
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True).stdout
    assert "serve" in out and "verify-report" in out


def test_root_keygen_certify_issue_is_a_production_chain(cli, tmp_path: Path, monkeypatch) -> None:
    """The vendor's steps: a root, a signing key, its certificate, then licenses carrying it."""
    from luminal.licensing import keys

    root, signing = tmp_path / "offline" / "root", tmp_path / "keys" / "vendor-2026"
    assert vendor_cli("root-keygen", "-o", root)[0] == 0
    rc, out, err = vendor_cli("keygen", "-o", signing)
    assert rc == 0 and "not certified" in out, err
    rc, out, err = vendor_cli("certify", f"{signing}.pub.json", "--root-key", f"{root}.key")
    assert rc == 0, err
    assert Path(f"{signing}.cert.json").exists() and "certified for" in out
    lic = tmp_path / "license.json"
    rc, _, err = vendor_cli(
        "issue", "-k", f"{signing}.key", "--floating", "--licensee", "acme", "-o", lic
    )
    assert rc == 0, err
    # a release shipping this root
    root_key = read_public_key_file(Path(f"{root}.pub.json"))
    monkeypatch.setattr(keys, "shipped_keyring", lambda: keys.Keyring(roots=(root_key,)))
    rc, out, err = cli("license", "install", lic)
    assert rc == 0, err
    assert "(commercial)" in out and "(production key)" in out
    # a certificate for another key is refused when the signer loads it
    other = tmp_path / "keys" / "other"
    assert vendor_cli("keygen", "-o", other)[0] == 0
    Path(f"{other}.cert.json").write_bytes(Path(f"{signing}.cert.json").read_bytes())
    rc, _, err = vendor_cli(
        "issue", "-k", f"{other}.key", "--floating", "--licensee", "a", "-o", lic
    )
    assert rc == 2 and "is for key" in err
