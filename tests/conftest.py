import os
import sys
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))  # test modules share helpers (e.g. random_model)

FIXTURES = Path(__file__).parent.parent / "fixtures"

# CI: the same examples every run, so a failure is reproducible and never a fluke of the draw.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
