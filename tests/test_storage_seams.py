"""Code outside the module that defines a storage location asks the
location what it is (``Location.local_folder``), never its type: a new kind
of location must not need edits elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

from slipstream.format.location import LocalFolder, Location

PACKAGE = Path(__file__).resolve().parents[1] / "slipstream"
DEFINED_IN = {"LocalFolder": "format/location.py", "ObjectPrefix": "format/objectstore.py"}


def test_no_isinstance_on_a_location_type_outside_its_module():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        for name, home in DEFINED_IN.items():
            if path.relative_to(PACKAGE).as_posix() != home and re.search(rf"isinstance\([^)]*\b{name}\b", text):
                found.append(f"{path.relative_to(PACKAGE)}: isinstance(..., {name})")
    assert found == []


def test_a_local_folder_says_where_its_files_are(tmp_path):
    location: Location = LocalFolder(tmp_path)
    assert location.local_folder() == tmp_path
