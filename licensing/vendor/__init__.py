"""The vendor side: issue and sign licenses, activate requests, verify reports, serve.

Installed as the `luminal-vendor` console script; the service needs the `vendor` extra
(starlette, uvicorn).  None of this runs on a customer's install.
"""
