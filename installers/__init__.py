"""Operations: the offline bundle, `luminal doctor`, CI step templates (luminal.installers).

bundle         `luminal bundle`: wheels, lock, SBOM, signed SHA256SUMS, install.sh
sbom           the bundle's CycloneDX 1.6 SBOM, from the wheels' own metadata
verify_bundle  the standalone verifier install.sh runs (stdlib only: no luminal, no
               `cryptography` yet; Ed25519 in pure Python)
doctor         `luminal doctor`: one independent, typed check per concern
support        `luminal doctor --support-bundle`: what a support engineer needs, redacted
install.sh     verify, then install into a venv with pip --no-index --require-hashes
ci/            a GitHub Actions composite action and a GitLab CI template
"""
