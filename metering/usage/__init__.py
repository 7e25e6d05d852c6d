"""Usage of compiled models: counted in the runtime, written to the ledger, billed.

counter    the in-memory counter `Session.run` adds to (no I/O)
meter      flushes a Session's counter to the ledger (timer, exit, close)
devices    the license's device count, checked where artifacts run
register   report-registered records (what usage is billed on)
statement  the fee statement for a period, from ledger records
sync       send an export to the vendor service
"""

from luminal.metering.usage.counter import UsageCounter
from luminal.metering.usage.meter import Meter, MeterConfig
from luminal.metering.usage.statement import Period, Statement, build

__all__ = ["Meter", "MeterConfig", "Period", "Statement", "UsageCounter", "build"]
