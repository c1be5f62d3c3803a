"""``slipstream status``: the control group's CPU quota in both cgroup
versions, the processor's extensions, each problem it detects with its fix
(a quota or an affinity below the loader's threads, no AVX2, a full cache
disk, a slow speed check), a real speed check, and the command's screen
and exit status."""

from __future__ import annotations

import dataclasses
import re
import platform
from pathlib import Path

import pytest

from slipstream import cli, status
from slipstream.status import Cache, Machine, Software, Speed

HEALTHY = Machine("Test CPU", ("sse4_2", "avx2"), 8, 8, None, 8, 0.1)
SOFTWARE = Software("3.11", "0.1.0", "0.1.0 (ABI 10)", True, "0.68", "2.13.0", ())
ROOMY = [Cache("compiled stages", Path("/cache/stages"), 1 << 20, 100 << 30)]


@pytest.mark.parametrize("files, quota", [
    ({"cpu.max": "150000 100000\n"}, 1.5),
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3.0),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({"cpu.max": "garbage\n"}, None),
    ({}, None),
])
def test_the_control_groups_quota_in_both_versions(tmp_path, files, quota):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert status.cgroup_quota(tmp_path) == quota


def test_the_machine_as_proc_and_the_control_group_describe_it(tmp_path):
    proc, group = tmp_path / "proc", tmp_path / "cgroup"
    proc.mkdir()
    group.mkdir()
    (proc / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Old CPU 9000\nflags\t\t: fpu sse2 sse4_2 ssse3\n\n"
                                  "processor\t: 1\nmodel name\t: Old CPU 9000\nflags\t\t: fpu sse2 sse4_2 ssse3\n")
    (group / "cpu.max").write_text("50000 100000\n")
    machine = status.read_machine(proc, group)
    assert (machine.cpu, machine.extensions, machine.quota) == ("Old CPU 9000", ("sse4_2",), 0.5)
    assert machine.threads >= 1 and 1 <= machine.usable <= machine.cores


def test_a_healthy_machine_has_no_problem():
    assert status.findings(HEALTHY, SOFTWARE, ROOMY, Speed(8 * status.IMAGES_PER_S_PER_CORE, 8)) == []


@pytest.mark.parametrize("change, words, fix", [
    (dict(machine=dataclasses.replace(HEALTHY, quota=2.5)), "allows 2.5 CPUs' worth of time, but a loader starts 8",
     "NUMBA_NUM_THREADS=2"),
    (dict(machine=dataclasses.replace(HEALTHY, usable=3)), "may run on 3 of the 8 CPUs", "num_threads=3"),
    (dict(caches=[Cache("converted datasets", Path("/small"), 0, 1 << 29)]),
     r"converted datasets cache \(/small\) has 537 MB free", "SLIPSTREAM_CACHE_DIR"),
    (dict(speed=Speed(100.0, 8), machine=dataclasses.replace(HEALTHY, load=6.0)),
     r"100 images/s with 8 threads, under half .* \(load average 6.0 on 8 CPUs\)", "other processes"),
])
def test_each_problem_is_found_with_its_fix(change, words, fix):
    given = dict(machine=HEALTHY, software=SOFTWARE, caches=ROOMY, speed=None) | change
    found = status.findings(**given)
    assert len(found) == 1
    assert re.search(words, found[0].problem), found[0].problem
    assert fix in found[0].fix


@pytest.mark.skipif(platform.machine() != "x86_64", reason="AVX2 is an x86-64 extension")
def test_a_processor_without_avx2_is_a_problem():
    found = status.findings(dataclasses.replace(HEALTHY, extensions=("sse4_2",)), SOFTWARE, ROOMY, None)
    assert [f.problem.split(":")[0] for f in found] == ["this processor has no AVX2"]


def test_the_speed_check_streams_the_standard_pipeline():
    speed = status.speed_check(seconds=0.5, threads=1)
    assert speed.threads == 1 and speed.images_per_s > 0 and speed.expected == status.IMAGES_PER_S_PER_CORE


def test_the_command_prints_one_screen_and_says_whether_it_found_a_problem(capsys):
    code = cli.main(["status", "--seconds", "0"])
    printed = capsys.readouterr().out
    for start in ("cpu ", "cores ", "threads ", "software ", "cuda ", "cache "):
        assert f"\n{start}" in f"\n{printed}", printed
    found = status.findings(status.read_machine(), status.read_software(), status.read_caches(), None)
    assert f"{len(found)} problem" in printed and code == (1 if found else 0)
