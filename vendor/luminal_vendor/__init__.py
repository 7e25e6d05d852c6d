"""The vendor side: issue and sign licenses, activate requests, verify reports, serve.

    cli      the `luminal-vendor` console script
    issuer   terms + signing key + binding -> a signed license
    app      the activation and usage service (starlette, run by uvicorn)
    storage  the service's records (SQLite, or PostgreSQL through psycopg)

Its own distribution (`pip install ./vendor` from the luminal repository; it depends on
`luminal` for the license, envelope and key formats), so the vendor's signing tools and
service never ship inside the customer's `luminal`.
"""
