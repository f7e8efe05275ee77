"""Seeing the protocol: Figure-4 cell tables and a step-by-step transaction stepper.

- :class:`CellTable`: Bigtable drawn as in the paper's Figure 4 (HTML and text);
- :class:`Table`: a small deterministic result table for notebooks;
- :func:`table`: evidence rows as a pandas DataFrame, or as a :class:`Table` where pandas
  is missing (the browser site);
- :class:`Stepper` / :class:`Frame`: transactions under a deterministic
  scheduler, one single-row Bigtable transaction per frame;
- :class:`StepperWidget` (``stepper.widget()``): Step, Back, Reset, Crash client;
- :class:`RecordedStepper`: the same controls over stored frames (a grading counterexample);
- :func:`plot_timeline`: transactions as [start_ts, commit_ts] bars (Figure 3);
- :func:`plot_lines`: measurements as :class:`Line` s (matplotlib, or SVG without it);
- :class:`Predict`: the student commits to an answer, the next cell reveals it.

Everything here reads the tracer stream and ``Bigtable.dump()``; the
protocol lives in the core only.
"""
from .charts import Line, plot_lines
from .predict import Predict, Reveal
from .scenarios import (figure4_setup, figure4_stepper, observer_race_stepper, oracle_race_stepper,
                        slow_holder_stepper, transfer, two_transfers_stepper)
from .recorded import RecordedFrame, RecordedStepper
from .stepper import Frame, Stepper, scan_everything
from .tables import CellTable, Table, format_value, show_whole_text, table
from .timeline import plot_timeline


def __getattr__(name):
    if name == "StepperWidget":           # ipywidgets only when asked for
        from .widget import StepperWidget
        return StepperWidget
    raise AttributeError(name)


__all__ = ["Predict", "Reveal", "CellTable", "Table", "table", "show_whole_text", "format_value", "Frame", "Stepper", "StepperWidget",
           "RecordedFrame", "RecordedStepper",
           "scan_everything", "figure4_setup", "figure4_stepper", "transfer",
           "two_transfers_stepper", "slow_holder_stepper", "oracle_race_stepper",
           "observer_race_stepper", "plot_timeline", "Line", "plot_lines"]
