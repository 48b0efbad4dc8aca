"""An uncaught custom exception with an explicit cause, a note, and an implicit context."""
import torch


class DataError(ValueError):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


def reshape(t):
    return t.view(3)


def load():
    try:
        reshape(torch.tensor([1.0, 2.0]))
    except RuntimeError as err:
        try:
            {}["missing"]
        except KeyError:
            exc = DataError("could not load tensor", 7)
            exc.add_note("note: the checkpoint may be truncated")
            raise exc from err


print("loading")
load()
