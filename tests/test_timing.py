"""The table make test prints at its end (tests/timing.py), from reports as pytest-xdist's controller receives them."""

from __future__ import annotations

from types import SimpleNamespace

from tests.timing import TOP_FILES, Timing, folder_of


def _report(nodeid: str, duration: float, cpu: float, worker: str = "gw0"):
    gateway = SimpleNamespace(id=worker)
    return SimpleNamespace(
        nodeid=nodeid, duration=duration, user_properties=[("cpu_s", cpu)], node=SimpleNamespace(gateway=gateway)
    )


def test_a_test_is_counted_in_its_first_level_folder():
    assert folder_of("tests/console/api/test_x.py::test_y[a/b]") == "tests/console"
    assert folder_of("tests/test_demo.py::test_demo") == "tests/*.py"


def test_folders_and_files_sum_their_phases_and_the_files_are_ranked_by_cpu():
    timing = Timing()
    for phase_duration, phase_cpu in ((1.0, 0.5), (3.0, 2.0), (0.5, 0.25)):  # setup, call, teardown
        timing.pytest_runtest_logreport(_report("tests/console/test_a.py::t", phase_duration, phase_cpu))
    timing.pytest_runtest_logreport(_report("tests/console/test_b.py::t", 9.0, 0.5, worker="gw1"))
    timing.pytest_runtest_logreport(_report("tests/test_c.py::t", 1.0, 4.0, worker="gw1"))

    lines = timing.table(wall_s=10.0, workers=2)
    assert lines[1].split() == ["tests/console", "2", "13.5", "93.1%", "3.2"]
    assert lines[2].split() == ["tests/*.py", "1", "1.0", "6.9%", "4.0"]
    assert lines[3].split() == ["all", "3", "14.5", "100%", "7.2"]
    assert lines[4] == "wall time 10 s on 2 pytest workers (in tests: gw0 4 s, gw1 10 s)"

    heaviest = timing.heaviest_files()
    assert [line.split()[-1] for line in heaviest] == [
        "tests/test_c.py",
        "tests/console/test_a.py",
        "tests/console/test_b.py",
    ]
    assert heaviest[1].split()[:4] == ["2.8", "CPU", "s", "4.5"]


def test_the_file_list_is_capped():
    timing = Timing()
    for n in range(TOP_FILES + 5):
        timing.pytest_runtest_logreport(_report(f"tests/test_{n}.py::t", 1.0, float(n)))
    heaviest = timing.heaviest_files()
    assert len(heaviest) == TOP_FILES
    assert heaviest[0].endswith(f"tests/test_{TOP_FILES + 4}.py")
