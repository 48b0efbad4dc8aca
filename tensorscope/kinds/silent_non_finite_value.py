"""The `silent-non-finite-value` kind: a NaN or Inf reached the loss, the gradients or the parameters and the program went on.

A hazard, not a failure: instrument/nonfinite.py records one hazard fact naming this kind when a sink
held a non-finite value, and kinds/non_finite_value.py builds the explanation from the same facts as
the diagnosis (see NOTE [Non-finite values handled on purpose] there).
"""

from __future__ import annotations

from tensorscope.kinds.non_finite_value import HAZARD as KIND, explain_hazard as explain

__all__ = ["KIND", "explain"]
