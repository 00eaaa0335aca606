"""Build backend: setuptools, after generating the gRPC Python modules from the .proto files.

The generated modules (apply_edit/v1/*_pb2*.py) are never committed: they are made from
proto/apply_edit/v1/apply_edit.proto at build time (also for editable installs), and a test checks
that what is installed matches what protoc makes of the .proto now.
"""

import subprocess
import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (the rest of the PEP 517 interface)

ROOT = Path(__file__).resolve().parent.parent
PROTOS = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))


def generate(out: Path = ROOT) -> None:
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}", f"--python_out={out}",
           f"--grpc_python_out={out}", f"--pyi_out={out}", *PROTOS]
    subprocess.run(cmd, check=True, cwd=ROOT / "proto")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    generate()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    generate()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    generate()
    return _setuptools.build_sdist(sdist_directory, config_settings)
