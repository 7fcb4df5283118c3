"""_tree.py - the object tree of maploc_checkpoint_object (docs/capi.md, "The object tree") as Python values.

Nothing is imported, called or evaluated: the few calls torch's weights-only unpickler also allows and that
are plain data (OrderedDict, set, frozenset, bytearray, complex, _codecs.encode for protocol-2 bytes) are
rebuilt here as those values; every other call stays an inert maploc.Object.
"""
import collections
import struct

_U32 = struct.Struct("<I").unpack_from
_I64 = struct.Struct("<q").unpack_from
_F64 = struct.Struct("<d").unpack_from
_NEW = 0x80


class Global:
    """A class or function the file names (module, name), never imported: maploc.Global("torch", "float32")."""
    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module = module
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Global) and (self.module, self.name) == (other.module, other.name)

    def __hash__(self):
        return hash((self.module, self.name))

    def __repr__(self):
        return f"maploc.Global({self.module!r}, {self.name!r})"


class Object:
    """An object torch would rebuild by running code (weights_only=False), kept inert: the call the file records.

    `cls` is the callable as "module.name" (a maploc.Global in `callable`), `args` its positional arguments,
    `kwargs` NEWOBJ_EX's keywords (None otherwise), `state` the last BUILD state (what __setstate__ or
    __dict__.update would receive; None without one), `states` every BUILD state, `items` the (key, value)
    pairs SETITEMS added (dict subclasses), `appended` what APPENDS added (list subclasses). Tensors inside
    are maploc tensors like everywhere else. A whole nn.Module comes back this way, its parameters in
    state["_parameters"].
    """
    __slots__ = ("callable", "args", "kwargs", "states", "items", "appended", "op")

    @property
    def cls(self):
        c = self.callable
        return f"{c.module}.{c.name}" if isinstance(c, Global) else repr(c)

    @property
    def state(self):
        return self.states[-1] if self.states else None

    def __repr__(self):
        return f"maploc.Object({self.cls})"


class PersistentId:
    """A persistent id no loader resolved (not a storage of the file): its value, inert."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"maploc.PersistentId({self.value!r})"


class _Pending:
    """A tuple being built, met again through a cycle: replaced once the tuple exists."""
    __slots__ = ("id",)

    def __init__(self, id_):
        self.id = id_


def _bytes_of_codecs(args):
    if isinstance(args, tuple) and len(args) == 2 and isinstance(args[0], str) and isinstance(args[1], str) \
            and args[1].lower().replace("-", "") in ("latin1", "iso88591"):
        return args[0].encode("latin-1")
    return None


class Decoder:
    """Decodes one buffer. `tensor(i)` makes the value for tensor index i (called once per index);
    `global_value(module, name)` may turn a global into a value (torch dtypes), else maploc.Global;
    `call(callable, args)` may rebuild a plain-data call (torch.Size), returning NotImplemented otherwise."""

    def __init__(self, buf, tensor, global_value=None, call=None):
        self.buf = buf
        self.pos = 0
        self.memo = []
        self.tensors = {}
        self.make_tensor = tensor
        self.global_value = global_value
        self.call_hook = call
        self.mutables = []
        self.pending_used = False

    def decode(self):
        v = self.value()
        if self.pending_used:
            self._fix_pending()
        return v

    def _u32(self):
        n = _U32(self.buf, self.pos)[0]
        self.pos += 4
        return n

    def _str(self):
        n = self._u32()
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", "surrogatepass")
        self.pos += n
        return s

    def _tensor(self, index):
        t = self.tensors.get(index)
        if t is None:
            t = self.tensors[index] = self.make_tensor(index)
        return t

    def value(self):
        buf = self.buf
        tag = buf[self.pos]
        self.pos += 1
        new = tag & _NEW
        tag &= 0x7F
        memo = self.memo
        if tag == 0x73:  # 's'
            v = self._str()
        elif tag == 0x58:  # 'X'
            v = self._tensor(self._u32())
        elif tag == 0x69:  # 'i'
            v = _I64(buf, self.pos)[0]
            self.pos += 8
        elif tag == 0x52:  # 'R'
            v = memo[self._u32()]
            if type(v) is _Pending:
                self.pending_used = True
            return v
        elif tag == 0x64:  # 'd'
            v = {}
            if new:
                memo.append(v)
            self.mutables.append(v)
            value = self.value
            tensors = self.tensors
            for _ in range(self._u32()):
                # A state_dict's entries inline: a string key and a tensor value (memoised or not) are read
                # here, anything else by value().
                pos = self.pos
                t = buf[pos]
                if t & 0x7F == 0x73:  # 's'
                    n = _U32(buf, pos + 1)[0]
                    pos += 5
                    k = buf[pos:pos + n].decode("utf-8", "surrogatepass")
                    self.pos = pos = pos + n
                    if t & _NEW:
                        memo.append(k)
                else:
                    k = value()
                    pos = self.pos
                t = buf[pos]
                if t & 0x7F == 0x58:  # 'X'
                    index = _U32(buf, pos + 1)[0]
                    self.pos = pos + 5
                    x = tensors.get(index)
                    if x is None:
                        x = tensors[index] = self.make_tensor(index)
                    if t & _NEW:
                        memo.append(x)
                else:
                    x = value()
                v[k] = x
            return v
        elif tag == 0x6C:  # 'l'
            v = []
            if new:
                memo.append(v)
            self.mutables.append(v)
            n = self._u32()
            value = self.value
            v.extend(value() for _ in range(n))
            return v
        elif tag == 0x74:  # 't'
            slot = len(memo)
            if new:
                memo.append(_Pending(slot))
            n = self._u32()
            value = self.value
            v = tuple([value() for _ in range(n)])
            if new:
                memo[slot] = v
            return v
        elif tag == 0x4E:  # 'N'
            return None
        elif tag == 0x54:  # 'T'
            return True
        elif tag == 0x46:  # 'F'
            return False
        elif tag == 0x66:  # 'f'
            v = _F64(buf, self.pos)[0]
            self.pos += 8
        elif tag == 0x49:  # 'I'
            n = self._u32()
            v = int.from_bytes(bytes(buf[self.pos:self.pos + n]), "little", signed=True)
            self.pos += n
        elif tag in (0x62, 0x61):  # 'b', 'a'
            n = self._u32()
            v = bytes(buf[self.pos:self.pos + n])
            if tag == 0x61:
                v = bytearray(v)
            self.pos += n
        elif tag in (0x53, 0x5A):  # 'S', 'Z'
            slot = len(memo)
            if new:
                memo.append(_Pending(slot))
            n = self._u32()
            items = [self.value() for _ in range(n)]
            v = set(items) if tag == 0x53 else frozenset(items)
            if new:
                memo[slot] = v
            return v
        elif tag == 0x47:  # 'G'
            module = self._str()
            name = self._str()
            v = None
            if self.global_value is not None:
                v = self.global_value(module, name)
            if v is None:
                v = Global(module, name)
        elif tag == 0x43:  # 'C'
            return self._call(new)
        elif tag == 0x50:  # 'P'
            slot = len(memo)
            if new:
                memo.append(_Pending(slot))
            v = PersistentId(self.value())
            if new:
                memo[slot] = v
            return v
        else:
            raise ValueError(f"maploc: object tree tag {tag:#x} at {self.pos - 1} is unknown")
        if new:
            memo.append(v)
        return v

    def _call(self, new):
        memo = self.memo
        slot = len(memo)
        if new:
            memo.append(_Pending(slot))
        op = self.buf[self.pos]
        self.pos += 1
        callable_ = self.value()
        g = callable_ if isinstance(callable_, Global) else None
        key = (g.module, g.name) if g is not None else None
        if key == ("collections", "OrderedDict"):
            v = collections.OrderedDict()
            if new:
                memo[slot] = v
            self.mutables.append(v)
            args = self.value()
            self.value()  # kwargs
            for _ in range(self._u32()):
                self.value()  # appended (none for an OrderedDict)
            if isinstance(args, tuple) and args and isinstance(args[0], (list, tuple)):
                for pair in args[0]:
                    v[pair[0]] = pair[1]
            for _ in range(self._u32()):
                k = self.value()
                v[k] = self.value()
            for _ in range(self._u32()):
                state = self.value()
                if isinstance(state, dict):
                    for name, attribute in state.items():
                        if isinstance(name, str):
                            try:
                                setattr(v, name, attribute)  # a state_dict's _metadata
                            except (AttributeError, TypeError):
                                pass
            return v
        obj = Object()
        obj.callable, obj.op = callable_, op
        if new:
            memo[slot] = obj
        obj.args = self.value()
        obj.kwargs = self.value()
        obj.appended = [self.value() for _ in range(self._u32())]
        obj.items = [(self.value(), self.value()) for _ in range(self._u32())]
        obj.states = [self.value() for _ in range(self._u32())]
        self.mutables.append(obj)
        v = self._plain(key, obj)
        if v is not NotImplemented and new:
            memo[slot] = v
        return obj if v is NotImplemented else v

    def _plain(self, key, obj):
        """A call of plain data rebuilt as its value, NotImplemented for anything else."""
        if obj.kwargs is not None or obj.appended or obj.items or obj.states or not isinstance(obj.args, tuple):
            return NotImplemented
        args = obj.args
        if key == ("_codecs", "encode"):
            b = _bytes_of_codecs(args)
            return NotImplemented if b is None else b
        if key is not None and key[0] == "builtins":
            name = key[1]
            try:
                if name in ("set", "frozenset") and len(args) <= 1:
                    return (set if name == "set" else frozenset)(*args)
                if name == "bytearray" and len(args) <= 1 and all(isinstance(a, (bytes, list)) for a in args):
                    return bytearray(*args)
                if name == "complex" and len(args) == 2 and all(isinstance(a, (int, float)) for a in args):
                    return complex(*args)
            except TypeError:
                return NotImplemented
        if self.call_hook is not None and obj.callable is not None:
            return self.call_hook(obj.callable, args)
        return NotImplemented

    def _fix_pending(self):
        memo = self.memo

        def real(x):
            return memo[x.id] if type(x) is _Pending else x
        for c in self.mutables:
            if isinstance(c, list):
                for i, x in enumerate(c):
                    if type(x) is _Pending:
                        c[i] = real(x)
            elif isinstance(c, dict):
                for k, x in list(c.items()):
                    if type(k) is _Pending:
                        raise ValueError("maploc: a dict key refers to a tuple that holds the dict (a cycle "
                                         "maploc cannot rebuild)")
                    if type(x) is _Pending:
                        c[k] = real(x)
            elif isinstance(c, Object):
                c.args = _fix_tuple(c.args, real)
                c.appended = [real(x) for x in c.appended]
                c.items = [(real(k), real(x)) for k, x in c.items]
                c.states = [real(x) for x in c.states]
        for v in memo:
            if isinstance(v, tuple) and any(type(x) is _Pending for x in v):
                raise ValueError("maploc: a tuple holds, through other tuples only, a tuple being built "
                                 "(a cycle maploc cannot rebuild)")


def _fix_tuple(t, real):
    if isinstance(t, tuple) and any(type(x) is _Pending for x in t):
        return tuple(real(x) for x in t)
    return t
