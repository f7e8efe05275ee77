"""What the SVG drawings share: where matplotlib is missing (the browser site), a figure
is drawn as SVG and shown the way the inline backend shows a figure."""
from __future__ import annotations

import html


def pyplot():
    """``matplotlib.pyplot``, or ``None`` where matplotlib is not installed."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def show(drawing):
    """Display ``drawing`` now (as a figure would be shown) and return it."""
    from IPython.display import display
    display(drawing)
    return drawing


def svg_open(width: float, height: float, title: str) -> list:
    """The opening tag of an SVG drawing and its centred title, as a list of parts."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'font-family="sans-serif" font-size="12">',
            f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" font-size="14">'
            f'{html.escape(title)}</text>']
