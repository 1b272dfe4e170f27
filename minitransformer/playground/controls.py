"""One view, three ways to show it: :func:`plot_view`, :func:`static_panels` (stored in the lesson), :func:`live`.

Figures are ``matplotlib.figure.Figure`` rather than pyplot, so a view redrawn a hundred times leaves no figure
open; ipywidgets (the ``notebooks`` extra) is imported only inside :func:`live`.
"""

from __future__ import annotations

import inspect
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure, SubFigure

__all__ = ["Fixed", "figure_size", "fixed", "live", "options_from", "plot_view", "static_panels"]

#: Size in inches of one panel when a draw function names none (see :func:`figure_size`).
DEFAULT_SIZE = (6.0, 3.6)

DrawFunction = Callable[..., Any]


def figure_size(width: float, height: float) -> Callable[[DrawFunction], DrawFunction]:
    """Decorator that records the size (inches) one panel of a draw function needs.

    :func:`plot_view`, :func:`static_panels` and :func:`live` read it from ``draw.figsize``.
    """
    def mark(draw: DrawFunction) -> DrawFunction:
        draw.figsize = (float(width), float(height))  # type: ignore[attr-defined]
        return draw
    return mark


def options_from(**rules: Callable[..., Sequence[Any]]) -> Callable[[DrawFunction], DrawFunction]:
    """Decorator: the options of a setting's control computed from the other settings."""
    for name, rule in rules.items():
        if not callable(rule):
            raise TypeError(f"options_from: the rule for {name!r} must be a function of the settings, got {rule!r}")

    def mark(draw: DrawFunction) -> DrawFunction:
        draw.option_rules = {**getattr(draw, "option_rules", {}), **rules}  # type: ignore[attr-defined]
        return draw
    return mark


@dataclass(frozen=True)
class Fixed:
    """A value passed unchanged to the draw function by :func:`live`, never turned into a control.

    Needed only for a value that would otherwise become a control: a bool (check box), a str
    (text box), a tuple (slider), a list (drop-down) or a set (multiple selection). Other values
    (a model, a number, None) are passed unchanged anyway.
    """

    value: Any


def fixed(value: Any) -> Fixed:
    """Mark ``value`` as a setting of :func:`live` that gets no control (see :class:`Fixed`)."""
    return Fixed(value)


def _parameters(draw: DrawFunction) -> tuple[dict[str, inspect.Parameter], bool]:
    """The keyword parameters of ``draw`` after its first (the figure), and whether it takes ``**kwargs``."""
    if not callable(draw):
        raise TypeError(f"draw must be a function draw(fig, **settings), got {type(draw).__name__} {draw!r}")
    params = list(inspect.signature(draw).parameters.values())
    if not params:
        raise ValueError(f"{getattr(draw, '__name__', draw)} takes no arguments: expected draw(fig, **settings)")
    rest = params[1:]
    named = {p.name: p for p in rest if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named, any(p.kind == p.VAR_KEYWORD for p in rest)


def _check_names(draw: DrawFunction, names: Sequence[str]) -> dict[str, inspect.Parameter]:
    named, open_ended = _parameters(draw)
    unknown = [n for n in names if n not in named and not open_ended]
    if unknown:
        raise ValueError(f"{getattr(draw, '__name__', 'draw')} has no setting {', '.join(map(repr, unknown))}: "
                         f"expected one of {', '.join(named) or '(none)'}")
    return named


def _size(draw: DrawFunction, figsize: tuple[float, float] | None) -> tuple[float, float]:
    size = figsize if figsize is not None else getattr(draw, "figsize", DEFAULT_SIZE)
    if len(size) != 2 or not all(isinstance(v, (int, float)) and v > 0 for v in size):
        raise ValueError(f"figsize must be (width, height) in inches, two positive numbers, got {size!r}")
    return float(size[0]), float(size[1])


def plot_view(draw: DrawFunction, *, figsize: tuple[float, float] | None = None, **settings: Any) -> Figure:
    """The view of ``draw`` for one setting, as a new ``Figure``."""
    _check_names(draw, list(settings))
    figure = Figure(figsize=_size(draw, figsize), layout="constrained")
    draw(figure, **settings)
    return figure


def static_panels(draw: DrawFunction, param_name: str, values: Sequence[Any], *,
                  figsize: tuple[float, float] | None = None, titles: Sequence[str] | None = None,
                  stacked: bool = False, **fixed_settings: Any) -> Figure:
    """The view of ``draw`` side by side for a few values of one setting, in one ``Figure``.

    Each panel is a ``SubFigure`` titled ``"<param_name> = <value>"`` (or by ``titles``); the
    other settings are the same in every panel.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"values must be a list of settings of {param_name!r}, got {type(values).__name__}")
    if not 1 <= len(values) <= 6:
        raise ValueError(f"expected 1 to 6 values of {param_name!r} (2 or 3 read best), got {len(values)}")
    if titles is not None and len(titles) != len(values):
        raise ValueError(f"expected one title per value, got {len(titles)} titles for {len(values)} values")
    if param_name in fixed_settings:
        raise ValueError(f"{param_name!r} is the setting that changes between panels: do not also fix it")
    _check_names(draw, [param_name, *fixed_settings])
    width, height = _size(draw, figsize)
    n = len(values)
    if stacked:
        figure = Figure(figsize=(width, (height + 0.4) * n), layout="constrained")
        panels = figure.subfigures(n, 1, squeeze=False)[:, 0]
    else:
        figure = Figure(figsize=(width * n, height + 0.4), layout="constrained")
        panels = figure.subfigures(1, n, squeeze=False)[0]
    for k, (panel, value) in enumerate(zip(panels, values)):
        draw(panel, **fixed_settings, **{param_name: value})
        panel.suptitle(titles[k] if titles is not None else f"{param_name} = {value}", fontweight="bold")
    return figure


def _ipywidgets() -> Any:
    try:
        import ipywidgets
    except ImportError as error:
        raise ImportError(
            "live controls need ipywidgets, which is not installed: install the notebooks extra "
            "(pip install -e '.[notebooks]') or ipywidgets itself (pip install 'ipywidgets>=8')"
        ) from error
    return ipywidgets


def _start(options: Sequence[Any], default: Any) -> Any:
    return default if any(default is o or default == o for o in options) else options[0]


def _control(widgets: Any, name: str, spec: Any, default: Any, continuous: bool) -> Any | None:
    """The widget that ``spec`` asks for, or None when ``spec`` is a fixed value."""
    style = {"description_width": "initial"}
    if isinstance(spec, widgets.ValueWidget):
        if not spec.description:
            spec.description = name
        return spec
    if isinstance(spec, bool):
        return widgets.Checkbox(value=spec, description=name, indent=False)
    if isinstance(spec, str):
        return widgets.Text(value=spec, description=name, continuous_update=False, style=style,
                            layout=widgets.Layout(width="28em"))
    if isinstance(spec, tuple):
        if len(spec) not in (2, 3) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in spec):
            raise ValueError(f"control {name!r}: a tuple makes a slider and must be (min, max) or (min, max, step) "
                             f"numbers, got {spec!r}")
        low, high = spec[0], spec[1]
        if not low < high:
            raise ValueError(f"control {name!r}: slider (min, max) needs min < max, got {spec!r}")
        is_int = all(isinstance(v, int) for v in spec)
        step = spec[2] if len(spec) == 3 else (1 if is_int else (high - low) / 100)
        ok = isinstance(default, (int, float)) and not isinstance(default, bool) and low <= default <= high
        value = default if ok else low
        kind = widgets.IntSlider if is_int and isinstance(value, int) else widgets.FloatSlider
        return kind(value=value, min=low, max=high, step=step, description=name, continuous_update=continuous,
                    style=style)
    if isinstance(spec, (set, frozenset)):
        if not spec:
            raise ValueError(f"control {name!r}: a set makes a multiple selection and needs at least one option")
        options = sorted(spec, key=lambda o: (str(type(o)), o))
        chosen = tuple(default) if isinstance(default, (list, tuple)) and set(default) <= spec else ()
        return widgets.SelectMultiple(options=[(str(o), o) for o in options], value=chosen, description=name,
                                      rows=min(len(options), 8), style=style)
    if isinstance(spec, (list, range)):
        options = list(spec)
        if not options:
            raise ValueError(f"control {name!r}: a list makes a drop-down and needs at least one option")
        pairs = [o if isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], str) else (str(o), o) for o in options]
        values = [v for _, v in pairs]
        start = _start(values, default)
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if numeric and len(values) > 1:
            return widgets.SelectionSlider(options=pairs, value=start, description=name,
                                           continuous_update=continuous, style=style)
        return widgets.Dropdown(options=pairs, value=start, description=name, style=style)
    return None


def live(draw: DrawFunction, *, continuous_update: bool = False, figsize: tuple[float, float] | None = None,
         **controls: Any) -> Any:
    """ipywidgets controls for the settings of ``draw``, and the view redrawn whenever one moves.

    Each keyword names a setting of ``draw``; its value says which control to build:
    """
    widgets = _ipywidgets()
    named = _check_names(draw, list(controls))
    size = _size(draw, figsize)
    made: dict[str, Any] = {}
    fixed_settings: dict[str, Any] = {}
    for name, spec in controls.items():
        if isinstance(spec, (Fixed, widgets.fixed)):
            fixed_settings[name] = spec.value
            continue
        default = named[name].default if name in named else inspect.Parameter.empty
        control = _control(widgets, name, spec, default, continuous_update)
        if control is None:
            fixed_settings[name] = spec
        else:
            made[name] = control
    if not made:
        raise ValueError("live needs at least one control (a tuple, list, bool, str or widget); "
                         f"got only fixed settings {sorted(fixed_settings)}")

    updating = _follow_option_rules(widgets, draw, named, fixed_settings, made)

    def redraw(**values: Any) -> None:
        from IPython.display import Image, display

        if updating():  # a control's options are being rebuilt: the move that caused it redraws once after
            return
        figure = Figure(figsize=size, layout="constrained")
        draw(figure, **fixed_settings, **values)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100)
        display(Image(data=buffer.getvalue(), format="png"))

    output = widgets.interactive_output(redraw, made)
    row = widgets.HBox(list(made.values()), layout=widgets.Layout(flex_flow="row wrap"))
    return widgets.VBox([row, output])


def _follow_option_rules(widgets: Any, draw: DrawFunction, named: dict[str, inspect.Parameter],
                         fixed_settings: dict[str, Any], made: dict[str, Any]) -> Callable[[], bool]:
    """Apply the ``option_rules`` of ``draw`` (:func:`options_from`) to its selection controls, now and whenever
    another control moves; return a function that says whether options are being rebuilt at the moment.

    The observers are registered before :func:`live` connects the view, so that the options are right
    by the time the view is redrawn for the move.
    """
    rules = {name: rule for name, rule in getattr(draw, "option_rules", {}).items()
             if isinstance(made.get(name), (widgets.SelectMultiple, widgets.Dropdown, widgets.SelectionSlider))}
    busy = [False]

    def settings() -> dict[str, Any]:
        defaults = {n: p.default for n, p in named.items() if p.default is not inspect.Parameter.empty}
        return {**defaults, **fixed_settings, **{n: c.value for n, c in made.items()}}

    def update(change: Any = None) -> None:
        for name, rule in rules.items():
            try:
                options = list(rule(**settings()))
            except Exception:  # noqa: BLE001 - a setting the view refuses (an empty sentence): it says why itself
                continue
            control = made[name]
            current = [o[1] if isinstance(o, tuple) and len(o) == 2 else o for o in control.options]
            if not options or current == options:
                continue
            pairs = [(str(o), o) for o in options]
            busy[0] = True
            try:
                if isinstance(control, widgets.SelectMultiple):
                    kept = tuple(v for v in control.value if v in options)
                    control.options = pairs
                    control.rows = min(len(pairs), 8)
                    control.value = kept
                else:
                    kept = control.value
                    control.options = pairs
                    control.value = kept if kept in options else options[0]
            finally:
                busy[0] = False

    update()
    for name, control in made.items():
        if name not in rules:
            control.observe(update, "value")
    return lambda: busy[0]


def _is_figure(fig: object) -> bool:
    return isinstance(fig, (Figure, SubFigure))


def check_figure(fig: object, draw_name: str) -> None:
    """A clear error when a draw function is given something other than a Figure or SubFigure."""
    if not _is_figure(fig):
        raise ValueError(f"{draw_name} draws into a matplotlib Figure or SubFigure, got {type(fig).__name__}: "
                         f"call it as {draw_name}(Figure(), ...) or use plot_view({draw_name}, ...)")
