"""``spark-submit properties/campaign/__main__.py [options]``: ``kraftcheck campaign`` under spark-submit
(also ``python -m properties.campaign``)."""

import sys
from pathlib import Path

if __name__ == "__main__":
    if not __package__:  # run as a file (spark-submit): the project, not properties/campaign/, on the path
        sys.path[0] = str(Path(__file__).resolve().parents[2])
    from properties.cli import main

    raise SystemExit(main(["campaign", *sys.argv[1:]]))
