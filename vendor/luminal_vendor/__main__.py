"""`python -m luminal_vendor ...`: the same as the `luminal-vendor` console script."""

from luminal_vendor.cli import main

main()
