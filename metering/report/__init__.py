"""Improvement reports: a benchmark as a signed in-toto Statement, its verification, and
its renderings.

    statement   build the Statement, sign it (DSSE, this install's Ed25519 key), write, read
    verify      check the signature and recompute every derived number from the raw timings
    evidence    the report against its license (terms, bound signer) and its subjects
    view        the formatted summary the renderers share
    html        one self-contained page with inline SVG plots (`charts`)
    markdown    GitHub-flavoured markdown (for $GITHUB_STEP_SUMMARY)
    junit       JUnit XML, one test case per validity check
"""

from luminal.metering.report.evidence import LicenseFile
from luminal.metering.report.statement import PREDICATE_TYPE, STATEMENT_TYPE, read, sign_and_write
from luminal.metering.report.verify import Evidence, Verified, customer_license, load_key, verify

__all__ = [
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "Evidence",
    "LicenseFile",
    "Verified",
    "customer_license",
    "load_key",
    "read",
    "sign_and_write",
    "verify",
]
