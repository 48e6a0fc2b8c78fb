"""`python -m apprafter` runs the CLI (tests use it to run the installed code without PATH lookups)."""

from apprafter.entry import main

main()
