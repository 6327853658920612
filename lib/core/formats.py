"""Number formatting with d3-format strings, the syntax Vega-Lite and dashboard specs use.

Supported: [[fill]align][sign][$][0][width][,][.precision][~][type] with types
f, d, %, s (SI prefix), e, g, r and none, the alignments <, >, ^ and =
(the 0 flag means = with zeros: "−002"), and d3's ~, which trims trailing
zeros of the fraction (",.1~f" writes 29 as "29" and 29.4 as "29.4"). Other d3 types (x, b, o, c, n, p)
are refused rather than shown as decimals. Enough for KPI cards, tables and
insight text to show numbers exactly as the charts do.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal

_SPEC = re.compile(r"^(?:(.)?([<>^=]))?([+\-( ])?(\$)?(0)?(\d+)?(,)?(?:\.(\d+))?(~)?([fdsegr%])?$")
# d3 clamps precision to 0-20 (21 significant digits); a width past a line's length only pads. A format
# from a spec is untrusted ("{{q.c|9999999999}}" in a report's prose), so larger ones are refused, not padded to gigabytes.
MAX_WIDTH, MAX_PRECISION = 100, 20
_SI = [(1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")]


def format_value(value, spec: str | None = None) -> str:
    """Format any query value for display: numbers by `spec`, dates as ISO, None as an em dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float, Decimal)):
        return format_number(float(value) if isinstance(value, Decimal) else value, spec)
    if isinstance(value, dt.datetime):
        if spec and "%" in spec and not _SPEC.match(spec):
            return _strftime(value, spec)
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ", timespec="minutes")
    if isinstance(value, dt.date):
        return _strftime(value, spec) if spec and "%" in spec and not _SPEC.match(spec) else value.isoformat()
    return str(value)


# A noun after a placeholder's number ("{{wk.sites|d site}}", "{{wk.sites|site}}", "{{n.people|,d person/people}}").
_NOUN = re.compile(r"^[A-Za-z][A-Za-z'-]*(?: [A-Za-z][A-Za-z'-]*)*(?:/[A-Za-z][A-Za-z'-]*(?: [A-Za-z][A-Za-z'-]*)*)?$")


def format_counted(value, spec: str | None = None) -> str:
    """A text placeholder's value: `spec` is a format (as `format_value` takes), or a format and then a noun, or
    a noun alone; the noun follows the number, singular when the number reads "1" and plural otherwise
    ("1 site", "6 sites"), `singular/plural` for a noun whose plural is not made by adding s ("person/people").
    A date's strftime format (with %) and anything that is not a number keep `format_value`'s way."""
    is_number = isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)
    if not spec or not is_number or "%" in spec:
        return format_value(value, spec)
    head, _, rest = spec.strip().partition(" ")
    if rest and _SPEC.match(head) and _NOUN.match(rest.strip()):
        fmt, noun = head, rest.strip()
    elif not _SPEC.match(spec.strip()) and _NOUN.match(spec.strip()):
        fmt, noun = None, spec.strip()
    else:
        return format_value(value, spec)
    number = format_value(value, fmt)
    singular, _, plural = noun.partition("/")
    return f"{number} {singular if number == '1' else plural or pluralise(singular)}"


def pluralise(noun: str) -> str:
    """An English noun's plural by the common rule, on its last word: site -> sites, box -> boxes, entry -> entries."""
    head, _, last = noun.rpartition(" ")
    if re.search(r"(s|x|z|ch|sh)$", last):
        last += "es"
    elif re.search(r"[^aeiou]y$", last):
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def _strftime(value: dt.date, spec: str) -> str:
    """strftime with d3-time-format's %q (the quarter, 1-4), so a chart axis and a text show a period alike."""
    quarter = str((value.month - 1) // 3 + 1)
    return value.strftime(re.sub(r"%(.)", lambda m: quarter if m.group(1) == "q" else m.group(0), spec))


def format_number(value: float, spec: str | None = None) -> str:
    if isinstance(value, float) and not math.isfinite(value):  # DuckDB divides by zero into ±inf
        return "—" if math.isnan(value) else ("∞" if value > 0 else "−∞")
    if spec is None or spec == "":
        if isinstance(value, int):
            return f"{value:,}"
        if abs(value) < 1e6 and value.is_integer():  # a whole figure without ".00"
            return f"{int(value):,}"
        return f"{value:,.2f}" if abs(value) < 1e6 else _si(value, 3)
    match = _SPEC.match(spec)
    if not match:
        raise ValueError(f"unsupported number format {spec!r}")
    fill, align, sign, currency, zero, width, comma, precision, trim, kind = match.groups()
    if int(width or 0) > MAX_WIDTH or int(precision or 0) > MAX_PRECISION:
        raise ValueError(f"unsupported number format {spec[:40]!r}: width at most {MAX_WIDTH} and precision at most {MAX_PRECISION}")
    precision = int(precision) if precision is not None else None
    negative = value < 0
    magnitude = abs(value)
    if kind == "%":
        body = f"{magnitude * 100:{',' if comma else ''}.{6 if precision is None else precision}f}%"
    elif kind == "f":
        body = f"{magnitude:{',' if comma else ''}.{6 if precision is None else precision}f}"
    elif kind == "d":
        body = f"{round(magnitude):{',' if comma else ''}d}"
    elif kind == "s":
        body = _si(magnitude, 6 if precision is None else precision)
    elif kind == "e":
        body = f"{magnitude:.{6 if precision is None else precision}e}"
    elif kind == "g":
        body = f"{magnitude:{',' if comma else ''}.{6 if precision is None else precision}g}"
    elif kind == "r":
        body = _rounded(magnitude, 6 if precision is None else max(precision, 1), comma is not None)
    else:  # no type: like g, but trailing zeros trimmed
        body = f"{magnitude:{',' if comma else ''}.{12 if precision is None else precision}g}"
    if trim and "." in body and "e" not in body:  # d3's ~: insignificant trailing zeros go, and a bare point
        digits = body.rstrip("%YZEPTGMkmµn")  # the number before a percent sign or an SI prefix
        body = digits.rstrip("0").rstrip(".") + body[len(digits) :]
    # d3 keeps the sign and currency apart from the digits, so "=" (and the 0 flag) pads between them.
    prefix, suffix = ("$" if currency else ""), ""
    if negative and float(re.sub(r"[^0-9.]", "", body) or 0) != 0:
        prefix, suffix = ("(" + prefix, ")") if sign == "(" else ("−" + prefix, "")
    elif sign in ("+", " "):
        prefix = sign + prefix
    if zero and not align:
        fill, align = fill or "0", "="
    pad = max(0, int(width or 0) - len(prefix) - len(body) - len(suffix)) * (fill or " ")
    align = align or ">"
    if align == "<":
        return prefix + body + suffix + pad
    if align == "=":
        return prefix + pad + body + suffix
    if align == "^":
        half = len(pad) // 2
        return pad[:half] + prefix + body + suffix + pad[half:]
    return pad + prefix + body + suffix


def _rounded(value: float, significant: int, comma: bool) -> str:
    """d3's type r: rounded to `significant` digits, in decimal notation (4223 at 2 digits is 4200)."""
    mantissa, exponent = f"{value:.{significant - 1}e}".split("e")
    digits, power = mantissa.replace(".", ""), int(exponent)
    if power < 0:
        return "0." + "0" * (-power - 1) + digits
    if len(digits) > power + 1:
        whole, fraction = digits[: power + 1], "." + digits[power + 1 :]
    else:
        whole, fraction = digits + "0" * (power + 1 - len(digits)), ""
    return (f"{int(whole):,}" if comma else whole) + fraction


def _si(value: float, significant: int) -> str:
    if value == 0:
        return "0"
    for factor, prefix in _SI:
        if abs(value) >= factor:
            scaled = value / factor
            text = f"{scaled:.{max(significant, 1)}g}"
            if "e" in text:
                text = f"{scaled:.0f}"
            return text + prefix
    return f"{value:.{significant}g}"


def _luminance(color: str) -> float:
    """WCAG relative luminance of a #rrggbb colour."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)


def contrast_ratio(foreground: str, background: str) -> float:
    """The WCAG contrast ratio of two #rrggbb colours, from 1 to 21 (AA asks 4.5 of text)."""
    light, dark = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def readable_text_on(background: str) -> str:
    """Black or white text, whichever contrasts more with a #rrggbb background.

    White on the demo's amber (#ff9f1c) is about 2:1; black on it about 10:1.
    """
    return max(("#000000", "#ffffff"), key=lambda text: contrast_ratio(text, background))
