"""A report.json given on the command line (``tuner export --from FILE``), read like any other user input: a
regular file of bounded size (a FIFO, /dev/zero or a directory is one sentence, never a hang), UTF-8 JSON of
the report's structure, and then :func:`tuner.report.validate.check` — each failure one :class:`ConfigError`."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from tuner.emit.json import parse
from tuner.errors import ConfigError
from tuner.fs.inputfile import read_text
from tuner.report.model import Report
from tuner.report.validate import check

# A session of four families at the largest budgets writes a few MB (tests/fixtures/reports: 0.2 MB for a
# sandbox session); anything near this is not a report tuner wrote.
MAX_REPORT_BYTES = 64 << 20
FROM_HINT = ("--from takes a stored session (its id as 'tuner history' lists it, a unique prefix, or 'latest') "
             "or the path of a report.json that tuner wrote")
_NOT_A_REPORT_HINT = ("give the report.json that 'tuner recommend --output DIR' wrote, or "
                      "'tuner show SESSION --format json' prints")


def read(path: Path) -> Report:
    """The report in ``path``, checked; every failure one :class:`ConfigError` sentence with a hint."""
    text = read_text(path, MAX_REPORT_BYTES, kind="a report tuner wrote", hint=_NOT_A_REPORT_HINT,
                     missing_hint=FROM_HINT)
    try:
        report = parse(text)
    except json.JSONDecodeError as exc:
        why = f"not JSON: {exc.msg} at line {exc.lineno}"
    except ValidationError as exc:
        first = exc.errors()[0]
        why = (f"{exc.error_count()} problem{'s' if exc.error_count() > 1 else ''}, first at "
               f"{'.'.join(map(str, first['loc'])) or 'the top'}: {first['msg']}")
    except RecursionError:
        why = "JSON nested too deeply"
    except ValueError:  # an integer of thousands of digits (sys.set_int_max_str_digits)
        why = "a number too long to read"
    except (AttributeError, TypeError) as exc:
        why = f"not a report's structure ({type(exc).__name__})"
    else:
        return check(report, where=str(path))
    raise ConfigError(f"{path} is not a tuner report ({why})", hint=_NOT_A_REPORT_HINT)
