"""The once-per-start update check: this distribution's release list from the package
index, a verdict cached beside the database, a notice for the operator, and an explicit
install of a newer release (`check_update(apply=true)`).

    index.py    fetch and parse the release list (JSON API), for this distribution only
    verdict.py  newer / yanked / current from that list; the update-check.json cache
    checker.py  the background check, the notices, the check_update answer
    install.py  pip install of one pinned release into the running environment
"""

from cpersona import DISTRIBUTION

__all__ = ["DISTRIBUTION"]
