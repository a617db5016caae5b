"""The per-call state machine (one transition table) and the stream assembler that drives it."""

from .assembler import Assembler
from .call import CallRecord, Step
from .table import MACHINE, TERMINAL_STATES, TRANSITIONS, CallState, Trigger, next_state

__all__ = ["Assembler", "CallRecord", "Step", "MACHINE", "TERMINAL_STATES", "TRANSITIONS", "CallState",
           "Trigger", "next_state"]
