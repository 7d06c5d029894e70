"""Kept for lessons and exercises that import it: the message plans now live in
pplab/lower.py, where they are two lowerings of a schedule."""
from .lower import (Message, check_in_order, in_order_plan, lower, messages, p2p_messages,
                    up_front_plan)

__all__ = ["Message", "check_in_order", "in_order_plan", "lower", "messages", "p2p_messages",
           "up_front_plan"]
