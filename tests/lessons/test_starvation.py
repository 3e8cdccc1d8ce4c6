"""sim.lessons.starvation: jobs on one server under each policy (lesson Example 6), and aging."""
from __future__ import annotations

import pytest

from sim.lessons import lesson
from sim.lessons.starvation import (LESSON_JOBS, LONG, format_jobs, mean_wait, parse_jobs, run_config, service_table,
                                    start_of, stream_jobs, workload)
from sim.simulate import simulate


def run(jobs, policy, aging=0.0):
    return simulate(workload(jobs), run_config(policy, aging))


@pytest.mark.parametrize("policy,order,wait", [
    ("fcfs", "ABCDEF", 43.17), ("sjf", "ADFBCE", 37.00), ("priority", "ABECDF", 47.83)])
def test_lesson_orders_and_mean_waits(policy, order, wait):
    tr = run(LESSON_JOBS, policy)
    t = service_table(tr)
    assert "".join(t["job"]) == order
    assert mean_wait(tr) == wait
    a = t.set_index("job").loc["A"]
    assert (a["start"], a["end"], a["wait"]) == (0, 40, 0)
    assert (t["end"] - t["start"] == t["length"]).all()  # one job at a time, one unit per token


def test_the_same_figures_as_sim_lesson():
    lf = lesson.policies()
    for key, policy in (("fcfs", "fcfs"), ("shortest_first", "sjf"), ("priority", "priority")):
        tr = run(LESSON_JOBS, policy)
        assert list(service_table(tr)["job"]) == lf[key]["order"]
        assert mean_wait(tr) == lf[key]["mean_wait"]


def test_shortest_first_starves_long_and_aging_ends_it():
    jobs = stream_jobs()
    assert jobs[0] == (LONG, 0, 30, 1) and jobs[-1] == ("s39", 78, 2, 1)
    assert start_of(run(jobs, "sjf"), LONG) == 80 == lesson.policies()["starvation_long_start"]
    assert start_of(run(jobs, "sjf", aging=1.0), LONG) == 28
    assert start_of(run(jobs, "sjf", aging=2.0), LONG) < 28  # more aging, sooner


def test_priority_aging_lets_low_priority_jobs_catch_up():
    # with no aging the priority-0 jobs (B, E) go first; strong aging turns it back into arrival order
    assert "".join(service_table(run(LESSON_JOBS, "priority_aging"))["job"]) == "ABECDF"
    assert "".join(service_table(run(LESSON_JOBS, "priority_aging", aging=1.0))["job"]) == "ABCDEF"


def test_jobs_text_round_trip_and_errors():
    assert parse_jobs(format_jobs(LESSON_JOBS)) == list(LESSON_JOBS)
    assert parse_jobs("X 0 5\nY,2,3,-1") == [("X", 0, 5, 0), ("Y", 2, 3, -1)]
    for bad, why in [("", "no jobs"), ("A,0", "name, arrival"), ("A,0,x,1", "whole numbers"),
                     ("A,0,0,1", "length must be"), ("A,0,1;A,1,2", "must differ"), ("A B,0,1,1", "name, arrival"),
                     ("Ä,0,1", "job name")]:
        with pytest.raises(ValueError, match=why):
            parse_jobs(bad)
    with pytest.raises(ValueError, match="count"):
        stream_jobs(count=0)
