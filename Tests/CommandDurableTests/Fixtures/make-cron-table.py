#!/usr/bin/env python3
"""Makes cron-table.json: (expression, time zone, after) -> the next slot, as Python's croniter (PyPI,
an implementation independent of this library's) computes it; DurableCronTests checks DurableCron
against every row.

    pip install croniter && python3 make-cron-table.py > cron-table.json

Rows where the two rules differ on purpose are left out (DurableCron follows Vixie cron, documented):
- a day-of-month or day-of-week that begins with '*/' (such as '*/2') while the other is not '*':
  Vixie cron requires both (a field beginning with '*' is unrestricted); croniter matches either;
- a slot whose interval from `after` crosses a change of the zone's UTC offset: croniter fires a slot of
  a repeated hour twice, DurableCron once (those cases are checked by hand in the tests).
Ranges of one value (`3-3`, `6-6/1`) are not generated: croniter 7.0.0 ignores such a field (`* * * * 6-6`
fires on a Monday), a defect of its own.
The random choices are seeded: running the script again makes the same table.
"""
import json
import random
import sys
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

random.seed(20261127)
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney"]
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


def item(low, high, names=None):
    kind = random.choice(["value", "range", "step", "rangestep", "value", "list"])
    if kind == "value":
        value = random.randint(low, high)
        return names[value - low] if names and random.random() < 0.5 else str(value)
    if kind == "range":
        a = random.randint(low, high - 1)
        b = random.randint(a + 1, high)
        return f"{a}-{b}"
    if kind == "step":
        return f"*/{random.randint(1, max(1, (high - low) // 2))}"
    if kind == "rangestep":
        a = random.randint(low, high - 1)
        b = random.randint(a + 1, high)
        return f"{a}-{b}/{random.randint(1, max(1, b - a + 1))}"
    return ",".join(sorted({str(random.randint(low, high)) for _ in range(random.randint(2, 4))}, key=int))


def field(low, high, names=None, star=0.4):
    if random.random() < star:
        return "*"
    return item(low, high, names)


def expression():
    if random.random() < 0.06:
        return random.choice(["@hourly", "@daily", "@weekly", "@monthly", "@yearly"])
    minute = field(0, 59, star=0.15)
    hour = field(0, 23, star=0.35)
    dom = field(1, 28 if random.random() < 0.7 else 31, star=0.6)
    month = field(1, 12, MONTHS, star=0.6)
    dow = field(0, 6, DAYS, star=0.6)
    return " ".join([minute, hour, dom, month, dow])


def differs_on_purpose(expr):
    if expr.startswith("@"):
        return False
    fields = expr.split()
    dom, dow = fields[2], fields[4]
    # croniter matches either day when neither is a plain '*'; Vixie cron only when neither begins with '*'.
    return (dom.startswith("*/") and dow != "*") or (dow.startswith("*/") and dom != "*")


rows = []
while len(rows) < 400:
    expr = expression()
    if differs_on_purpose(expr):
        continue
    zone = random.choice(ZONES)
    tz = ZoneInfo(zone)
    after = datetime(2024, 1, 1, tzinfo=ZoneInfo("UTC")) + timedelta(seconds=random.randint(0, 3 * 365 * 86400))
    after = after.replace(second=random.choice([0, 0, 30]))
    local = after.astimezone(tz)
    nxt = croniter(expr, local).get_next(datetime)
    if nxt.utcoffset() != local.utcoffset():
        continue
    rows.append({
        "expression": expr,
        "timeZone": zone,
        "after": int(after.timestamp()),
        "next": int(nxt.timestamp()),
    })
json.dump(rows, sys.stdout, indent=0)
sys.stdout.write("\n")
