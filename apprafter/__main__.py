"""`python -m apprafter` runs the CLI (tests use it to run the installed code without PATH lookups)."""

from apprafter.entry import main

if __name__ == "__main__":  # not in the operator's render workers, which import this module as __mp_main__
    main()
