"""``percolator demo transfer|crash`` print the stepper's frames as text."""
import pytest

from percolator_ref.commands import main


def test_demo_transfer_prints_every_frame_of_figure4(capsys):
    assert main(["demo", "transfer"]) == 0
    out = capsys.readouterr().out
    assert out.count("frame ") >= 7
    assert "*7: I am primary*" in out and "*7: primary @ Bob.bal*" in out
    assert "*8: data @ 7*" in out
    assert "commit point" in out


def test_demo_crash_before_the_commit_point_rolls_back(capsys):
    assert main(["demo", "crash", "--after", "4"]) == 0
    out = capsys.readouterr().out
    assert "T7 crashes" in out and "roll back" in out
    assert "8: data @ 7" not in out


def test_demo_crash_after_the_commit_point_rolls_forward(capsys):
    assert main(["demo", "crash", "--after", "5"]) == 0
    out = capsys.readouterr().out
    assert "roll forward Joe.bal" in out


def test_demo_crash_rejects_a_step_out_of_range(capsys):
    assert main(["demo", "crash", "--after", "6"]) == 2
    assert "--after" in capsys.readouterr().err
