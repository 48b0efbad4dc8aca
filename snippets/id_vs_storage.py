# id() identifies the Python object, not the memory: detach() and view() give new
# objects (different id) over the SAME storage. Compare storages, not ids.
import torch

torch.manual_seed(0)
a = torch.randn(2, 3, requires_grad=True)
d = a.detach()
v = a.view(6)
c = a.clone()

def same_storage(p, q):
    return p.untyped_storage()._cdata == q.untyped_storage()._cdata

for name, t in (("d = a.detach()", d), ("v = a.view(6)", v), ("c = a.clone()", c)):
    print(f"{name:15} id equal: {id(t) == id(a)!s:5}  storage shared: {same_storage(a, t)!s:5}"
          f"  data_ptr equal: {t.data_ptr() == a.data_ptr()}")
alias = a                                    # plain assignment: same object, same id
print("alias = a       id equal:", id(alias) == id(a))
