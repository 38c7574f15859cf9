"""Build-path selection of the kernel build fixture (the seam where the Spack path plugs in)."""
import os
import stat

import pytest

pytest.importorskip('reframe')
from netregress.build import choose_build_path  # noqa: E402


def make_exes(directory, names):
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = directory / name
        path.write_text('#!/bin/sh\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_explicit_choice_wins(tmp_path):
    assert choose_build_path('cmake', {'build_path': 'spack'}, {}, None, []) == 'cmake'
    with pytest.raises(ValueError):
        choose_build_path('make', {}, {}, None, [])


def test_prebuilt_when_every_executable_exists(tmp_path):
    make_exes(tmp_path, ['nr-mpitest', 'nr-mpicoll'])
    assert choose_build_path('auto', {}, {}, str(tmp_path), ['nr-mpitest', 'nr-mpicoll']) == 'prebuilt'
    assert choose_build_path('auto', {}, {}, str(tmp_path), ['nr-mpitest', 'nr-ebb']) == 'cmake'
    assert choose_build_path('auto', {}, {}, None, ['nr-mpitest']) == 'cmake'


def test_partition_then_environment_extras():
    assert choose_build_path('auto', {'build_path': 'cmake'}, {'build_path': 'prebuilt'}, None, []) == 'cmake'
    assert choose_build_path('auto', {}, {'build_path': 'prebuilt'}, None, []) == 'prebuilt'
    # spack only where the Spack path can work; else the next choice
    assert choose_build_path('auto', {'build_path': 'spack'}, {}, None, [], 'spack is not on PATH') == 'cmake'
    assert choose_build_path('auto', {'build_path': 'spack'}, {'build_path': 'prebuilt'}, None, [],
                             'not concretized') == 'prebuilt'
    assert choose_build_path('auto', {'build_path': 'spack'}, {}, None, [], None) == 'spack'
    # an explicit request is honoured (and fails in the Spack fixture with its reason)
    assert choose_build_path('spack', {}, {}, None, [], 'spack is not on PATH') == 'spack'
