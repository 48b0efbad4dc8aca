"""The `silent-non-finite-value` kind: a NaN or Inf reached the loss, the gradients or the parameters and the program went on.

A hazard, not a failure: kinds/non_finite_value.py builds it from the same facts as the diagnosis
(``finding(ev, hazard=True)``); see NOTE [Non-finite values handled on purpose] there.
"""

from __future__ import annotations

from tensorscope.kinds.non_finite_value import HAZARD as KIND

__all__ = ["KIND"]
