"""The offline bundle: what it holds, and install.sh stopping before it installs anything
when a wheel, SHA256SUMS or its signature was altered (acceptance, issue 17)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from luminal.installers import verify_bundle
from luminal.installers.bundle import BundleResult, platform_tags
from luminal.licensing import dsse
from luminal.licensing.keys import key_id, raw_public
from tests.helpers.licensing_helpers import Vendor
from tests.installers.conftest import as_release


def _replace(path: Path, data: bytes) -> None:
    """A new file at `path` (the copy's files are hard links to the session's bundle)."""
    path.unlink()
    path.write_bytes(data)


def _install(bundle: Path, prefix: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(bundle / "install.sh"), "--prefix", str(prefix), "--python", sys.executable],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _assert_nothing_installed(done: subprocess.CompletedProcess[str], prefix: Path) -> None:
    assert done.returncode == 4, done.stderr
    assert "nothing was installed" in done.stderr
    assert not prefix.exists()  # not even the prefix folder


def test_the_bundle_holds_every_wheel_locked_in_the_sbom(built_bundle: BundleResult) -> None:
    root = built_bundle.path
    wheels = sorted((root / "wheels").glob("*.whl"))
    names = {w.name for w in built_bundle.wheels}
    assert {"luminal", "numpy", "onnx", "egglog", "cryptography", "typer"} <= names
    lock = (root / "requirements.lock").read_text().splitlines()[1:]
    digests = {hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels}
    assert len(lock) == len(wheels) and {ln.split("sha256:")[1] for ln in lock} == digests
    bom = json.loads((root / "sbom.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.6"
    assert bom["metadata"]["component"]["name"] == "luminal"
    listed = {c["name"]: c for c in bom["components"]} | {"luminal": bom["metadata"]["component"]}
    assert set(listed) == names
    assert {c["hashes"][0]["content"] for c in listed.values()} == digests
    deps = {d["ref"]: d["dependsOn"] for d in bom["dependencies"]}
    assert any(ref.startswith("pkg:pypi/numpy@") for ref in deps[listed["luminal"]["bom-ref"]])
    manifest = json.loads((root / "bundle.json").read_text())
    assert manifest["platform"] == "manylinux_2_28_x86_64" and manifest["python"] == "3.11"


def test_the_signed_bundle_verifies(built_bundle: BundleResult, bundle_vendor: Vendor) -> None:
    found = verify_bundle.verify(built_bundle.path)
    assert found["signer"] == bundle_vendor.signer.keyid
    assert found["root"] == bundle_vendor.root_public.keyid
    assert found["files"] == len(list(built_bundle.path.rglob("*"))) - 3  # wheels/, sums, sig


def test_an_altered_wheel_stops_install_before_anything_is_installed(
    bundle_copy: Path, tmp_path: Path
) -> None:
    wheel = next((bundle_copy / "wheels").glob("luminal-*.whl"))
    raw = bytearray(wheel.read_bytes())
    raw[len(raw) // 2] ^= 1
    _replace(wheel, bytes(raw))
    done = _install(bundle_copy, tmp_path / "prefix")
    assert f"wheels/{wheel.name}: sha256 differs" in done.stderr
    _assert_nothing_installed(done, tmp_path / "prefix")


def test_altered_sums_stop_install(bundle_copy: Path, tmp_path: Path) -> None:
    # the attack: alter a wheel and write its new sum into SHA256SUMS
    wheel = next((bundle_copy / "wheels").glob("numpy-*.whl"))
    old = hashlib.sha256(wheel.read_bytes()).hexdigest()
    _replace(wheel, wheel.read_bytes() + b"\0")
    new = hashlib.sha256(wheel.read_bytes()).hexdigest()
    sums = bundle_copy / "SHA256SUMS"
    _replace(sums, sums.read_bytes().replace(old.encode(), new.encode()))
    done = _install(bundle_copy, tmp_path / "prefix")
    assert "SHA256SUMS: differs from the signed copy" in done.stderr
    _assert_nothing_installed(done, tmp_path / "prefix")


def test_sums_resigned_by_another_key_stop_install(bundle_copy: Path, tmp_path: Path) -> None:
    intruder = Ed25519PrivateKey.generate()
    sums = (bundle_copy / "SHA256SUMS").read_bytes()
    env = dsse.sign(verify_bundle.SUMS_TYPE, sums, {key_id(intruder.public_key()): intruder})
    _replace(bundle_copy / "SHA256SUMS.dsse.json", env.dumps())
    done = _install(bundle_copy, tmp_path / "prefix")
    assert "not a trusted key" in done.stderr
    _assert_nothing_installed(done, tmp_path / "prefix")


def test_an_added_wheel_stops_install(bundle_copy: Path, tmp_path: Path) -> None:
    (bundle_copy / "wheels" / "evil-1.0-py3-none-any.whl").write_bytes(b"PK")
    done = _install(bundle_copy, tmp_path / "prefix")
    assert "evil-1.0-py3-none-any.whl: not listed in SHA256SUMS" in done.stderr
    _assert_nothing_installed(done, tmp_path / "prefix")


def test_an_out_of_band_keyring_without_the_root_refuses(bundle_copy: Path, tmp_path: Path) -> None:
    # the operator's own copy of the vendor roots is what counts, not the bundle's
    other = Ed25519PrivateKey.generate().public_key()
    ring = tmp_path / "roots.json"
    public = __import__("base64").b64encode(raw_public(other)).decode()
    ring.write_text(json.dumps({"roots": [{"public_key": public}], "revoked": []}))
    assert verify_bundle.main([str(bundle_copy)]) == 0
    assert verify_bundle.main([str(bundle_copy), "--keyring", str(ring)]) == 4


def test_the_pure_python_ed25519_agrees_with_cryptography() -> None:
    key = Ed25519PrivateKey.generate()
    public = raw_public(key.public_key())
    for n in (0, 1, 64, 1000):
        message = os.urandom(n)
        sig = key.sign(message)
        assert verify_bundle.ed25519_verify(public, message, sig)
        assert not verify_bundle.ed25519_verify(public, message + b"x", sig)
        bad = bytearray(sig)
        bad[n % 64] ^= 4
        assert not verify_bundle.ed25519_verify(public, message, bytes(bad))
    other = raw_public(Ed25519PrivateKey.generate().public_key())
    assert not verify_bundle.ed25519_verify(other, b"m", key.sign(b"m"))


def test_platform_tags_take_older_manylinux_wheels() -> None:
    tags = platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in tags
    assert tags[-1] == "manylinux2014_x86_64"
    assert platform_tags("macosx_14_0_arm64") == ["macosx_14_0_arm64"]


def test_a_key_the_release_roots_did_not_certify_is_refused(
    cli, tmp_path: Path, bundle_vendor: Vendor
) -> None:  # type: ignore[no-untyped-def]
    stranger = Vendor.create(tmp_path / "stranger")  # its own root, not the release's
    with as_release(bundle_vendor):
        rc, _, err = cli("bundle", "-o", tmp_path / "b", "-k", stranger.key_path)
    assert rc == 4 and "not certified by a vendor root" in err
    assert not (tmp_path / "b").exists()


@pytest.mark.slow  # ~8 s: gzip of ~100 MB
def test_a_tarball_bundle_from_the_cli_verifies_after_extraction(
    cli, tmp_path: Path, wheelhouse: Path, bundle_vendor: Vendor
) -> None:  # type: ignore[no-untyped-def]
    import tarfile

    out = tmp_path / "luminal-bundle.tar.gz"
    with as_release(bundle_vendor):
        rc, stdout, err = cli(
            "bundle", "-o", out, "-k", bundle_vendor.key_path, "--wheelhouse", wheelhouse, "--json"
        )
    assert rc == 0, err
    doc = json.loads(stdout)
    assert doc["path"] == str(out) and doc["signer"] == bundle_vendor.signer.keyid
    assert doc["seconds"]["sign SHA256SUMS"] >= 0 and "build luminal wheel" in doc["seconds"]
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    (folder,) = (tmp_path / "x").iterdir()
    assert verify_bundle.main([str(folder)]) == 0
    # the wheel was built from a clean copy: nothing of the checkout's build/ or tests/
    import zipfile

    wheel = next((folder / "wheels").glob("luminal-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert (
        "luminal/installers/install.sh" in names and "luminal/installers/ci/luminal-ci.sh" in names
    )
    assert not any(n.startswith(("luminal/tests/", "luminal/build/")) for n in names)
    with as_release(bundle_vendor):
        rc, _, err = cli("bundle", "-o", out, "-k", bundle_vendor.key_path)
    assert rc == 2 and "already exists" in err


def test_the_verifier_purpose_matches_the_chain() -> None:
    # the standalone verifier cannot import luminal: its constants must equal the chain's
    from luminal.licensing.chain import CERT_TYPE, KeyPurpose

    assert verify_bundle.SIGNING_PURPOSE == KeyPurpose.LICENSE_SIGNING.value
    assert verify_bundle.CERT_TYPE == CERT_TYPE
