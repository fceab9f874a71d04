"""The program's objects on the tests' side, and the tests' on the program's (inside: names only the standard
library).

THE RULE's second half: an object of the program's is a stand-in (Proxy), one per object, of a stand-in of its
class (RemoteClass), which has exactly the special methods the program's class defines, each asked of the
program's process (FORWARD, forwarder). A comparison with a value of the tests' is NotImplemented, never asked.
An object the tests lend the program is a Ref there, which asks the tests' side only TESTS_ANSWER.
"""
if __package__:  # the host's import of the package
    from .values import builtin_class, exception_named
else:  # the zygote, which runs inside.py by path: its sibling files by name
    from values import builtin_class, exception_named

# The data model's special methods (those Python looks up on an object's class), by the class's own definition: a
# stand-in of a program's class carries those its class defines, each asked of the program's process; a comparison
# with a value of the tests' is theirs to decide (NotImplemented, never asked). What hands over raw memory (numpy's
# array interface, dlpack, the buffer protocol) is never asked: an AttributeError on the tests' side.
NUMERIC = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift", "and",
           "or", "xor")
COMPARE = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")
FORWARD = frozenset(COMPARE + tuple(f"__{p}{n}__" for n in NUMERIC for p in ("", "r", "i") if p + n != "idivmod")
                    + tuple(f"__{n}__" for n in (
        "bool", "len", "length_hint", "iter", "next", "reversed", "contains", "getitem", "setitem", "delitem", "call",
        "neg", "pos", "abs", "invert", "int", "float", "complex", "index", "round", "trunc", "floor", "ceil", "bytes",
        "fspath", "enter", "exit", "await", "aiter", "anext", "aenter", "aexit", "hash")))
ALWAYS = ("__str__", "__repr__", "__format__", "__dir__", "__copy__", "__deepcopy__")  # the program's, always
RAW_MEMORY = ("__array_interface__", "__array_struct__", "__array__", "__dlpack__", "__dlpack_device__", "__buffer__",
              "__release_buffer__", "__array_priority__", "__array_ufunc__", "__array_function__")
# What the tests' side answers the program about an object the tests lent it (a Ref on the program's side).
OPS = {"iter": iter, "next": next, "enter": lambda o: type(o).__enter__(o),
       "exit": lambda o, name=None: type(o).__exit__(o, *exception_named(name))}
FILE_ATTRS = ("read", "readline", "readlines", "write", "writelines", "flush", "seek", "tell", "close", "closed",
              "readable", "writable", "seekable", "encoding", "errors", "newlines", "mode", "name")
TESTS_ANSWER = {"call": None, "getattr": FILE_ATTRS, "op": tuple(OPS)}


async def awaiting(proxy):
    """A coroutine of the program's, awaited in the tests: its own process runs it to its end."""
    return proxy._sandbox_ch.request("op", proxy, "__await__")


class Ref:
    # The program's side: a handle on an object the tests lent it (a callback, a file, an iterator of theirs), which
    # asks the tests' side only TESTS_ANSWER: a call, a file's attribute, iteration, a with block. It is equal to
    # itself only and shows a text of its own. Its __doc__ is None: no text of this file is made up for the tests'.
    __slots__ = ("_ch", "_h")

    def __init__(self, ch, h):
        object.__setattr__(self, "_ch", ch)
        object.__setattr__(self, "_h", h)

    def __getattr__(self, name):
        if name not in FILE_ATTRS:
            raise AttributeError(name)  # never asked
        return self._ch.request("getattr", self, name)

    def __setattr__(self, name, value):
        raise AttributeError(name)

    def __call__(self, *args, **kw):
        return self._ch.request("call", self, *args, **kw)

    def __iter__(self):
        return self._ch.request("op", self, "iter")

    def __next__(self):
        return self._ch.request("op", self, "next")

    def __enter__(self):
        return self._ch.request("op", self, "enter")

    def __exit__(self, kind, value, traceback):
        return bool(self._ch.request("op", self, "exit", kind and kind.__name__))

    def __repr__(self):
        return f"<an object of the tests, {self._h}>"


STOOD_BY = {}  # the tests' side: each stand-in class's channel


class RemoteClass(type):
    """The tests' side: the type of a stand-in of a program's class (Channel.stand_in). Calling it, and reading or
    setting its attributes, is asked of the program's class; isinstance and issubclass among the program's classes
    follow the bases its description gave."""

    def __call__(cls, *args, **kw):
        return cls._ask("call", *args, **kw)

    def _ask(cls, op, *args, **kw):
        return STOOD_BY[cls].request(op, cls, *args, **kw)

    def __getattr__(cls, name):
        if name[:2] == "__" and name[-2:] == "__" and name != "__members__":  # (Python's machinery looks these up)
            raise AttributeError(name)
        return cls._ask("getattr", name)

    __dict__ = property(lambda cls: cls._ask("getattr", "__dict__"))  # vars(cls): the program's class's own

    def __setattr__(cls, name, value):
        cls._ask("setattr", name, value)

    def __delattr__(cls, name):
        cls._ask("delattr", name)


class RemoteContainerClass(RemoteClass):
    """The type of a stand-in of a program's class whose own type is a container (an Enum's): its items, length
    and membership are asked of the program's class too."""

    def __iter__(cls):
        return iter(cls._ask("op", "__iter__"))

    def __len__(cls):
        return cls._ask("op", "__len__")

    def __getitem__(cls, key):
        return cls._ask("op", "__getitem__", key)

    def __contains__(cls, x):
        return cls._ask("op", "__contains__", x)


class Proxy:
    """The tests' side: an object of the program's (a stand-in: Channel.proxy). Its attributes, any one the tests
    ask for, its text, its copies and the special methods its class defines are asked of the program's process,
    which computes them as Python would; a comparison with a value of the tests' is theirs to decide: Python's own
    answer when the program's side does not compute one (NotImplemented). Raw memory is never asked for."""
    __slots__ = ("_sandbox_ch", "_sandbox_h")

    def __getattr__(self, name):
        if name in RAW_MEMORY or name in ("_sandbox_ch", "_sandbox_h"):
            raise AttributeError(name)
        return ask(self, "getattr", name)

    def __setattr__(self, name, value):
        ask(self, "setattr", name, value)

    def __delattr__(self, name):
        ask(self, "delattr", name)

    def __reduce_ex__(self, protocol):
        raise TypeError(f"an object of the program's ({type(self).__name__}) is not pickled on the tests' side")


def ask(proxy, op, *args, **kw):
    return object.__getattribute__(proxy, "_sandbox_ch").request(op, proxy, *args, **kw)


class Asked(str):
    """A stand-in class's `__doc__` or `__module__`: on the class, the program's class's text (a str, as Python's
    type machinery reads `__module__` raw); on an instance, what the program's object answers (a function's own)."""

    def __get__(self, obj, cls=None):
        return self.text if obj is None else ask(obj, "getattr", self.name)


def asked(name, text):
    a = Asked(text or "")
    a.name, a.text = name, text
    return a


def forwarder(name):
    """A stand-in's special method `name`: asked of the program, as Python asks it of the program's class; a
    comparison with a value of the tests' (not a stand-in of the same side): NotImplemented, never asked."""
    if name == "__call__":
        return lambda self, *args, **kw: ask(self, "call", *args, **kw)
    if name in ("__exit__", "__aexit__"):  # the tests' exception, never swallowed by the program's code
        def leave(self, kind, value, traceback):
            done = ask(self, "op", name, kind and kind.__name__)
            return False if name == "__exit__" else finished(done)
        return leave
    if name == "__await__":
        def wait(self):
            return ask(self, "op", "__await__")
            yield  # (a generator: what an await runs)
        return wait
    compare = name in COMPARE

    def method(self, *args):
        if compare and object.__getattribute__(self, "_sandbox_ch").stood_for(args[0]) is None:
            return NotImplemented
        return ask(self, "op", name, *args)
    method.__name__ = name
    return method


async def finished(awaitable):
    await awaitable
    return False


for _name in ALWAYS:
    setattr(Proxy, _name, forwarder(_name) if _name != "__deepcopy__" else lambda self, memo=None: ask(
        self, "op", "__deepcopy__"))
del Proxy.__slots__  # (made: an instance's __slots__ is the program's to answer)


class StandIns:
    """The stand-ins' side of a Channel (a mixin of assertion.Channel over values.Codec): the program's side
    describes its classes and lends its objects with them; the tests' side makes their stand-ins."""

    def handle(self, x, depth=0):
        """An object that is not data, lent: the tests' as a number, the program's with its class (describe)."""
        if self.tests or self.sock is None or depth > 100:
            return self.lend(x)
        return {"cls": self.describe(x, depth)} if isinstance(x, type) else {
            "o": [self.lend(x)["h"], self.describe(type(x), depth)]}

    def yours(self, x):
        if type(x) is Ref and x._ch is self:
            return x._h
        return self.stood_for(x) if self.tests else None

    def remote(self, h):
        """The program's side: the handle of the tests' object number `h`."""
        return self.remotes.setdefault(h, Ref(self, h))

    def describe(self, t, depth):
        """The program's side: a class as the tests' side makes its stand-in, the first time it crosses (its
        number, names, docstring, the special methods it defines, whether it hashes, its bases, whether its own
        type is a container); then its number."""
        h = self.lend(t)["h"]
        if h in self.described:
            return [h]
        self.described.add(h)
        doc = t.__doc__ if type(t.__doc__) is str else None
        methods = sorted(m for m in FORWARD if getattr(t, m, None) not in (None, getattr(object, m, None)))
        bases = [self.describe(b, depth + 1) for b in t.__bases__ if depth < 100 and b is not object
                 and builtin_class(b.__name__) is not b]
        return [h, str(t.__name__), str(t.__qualname__), str(t.__module__), doc, methods,
                getattr(t, "__hash__", None) is None, bases, hasattr(type(t), "__iter__")]

    def stand_in(self, described):
        """The tests' side: the stand-in of a class of the program's (RemoteClass), made once from its description
        (describe): a class of the tests' side, of the program's class's names and docstring, whose instances
        (Proxy) have exactly the special methods it defines, each asked of the program, and whose bases are the
        stand-ins of its bases that are the program's."""
        h = described[0]
        if type(h) is not int or h < 0:
            raise ValueError("a class is a number")
        if h in self.stand_ins:
            return self.stand_ins[h]
        name, qualname, module, doc, methods, unhashable, bases, container = described[1:]
        if not all(type(v) is str for v in (name, qualname, module)) or type(methods) is not list or type(
                bases) is not list or type(doc) not in (str, type(None)) or not {type(unhashable), type(container)} <= {
                bool}:
            raise ValueError("not a class's description")
        bases = tuple(dict.fromkeys(self.stand_in(b) for b in bases)) or (Proxy,)
        body = {m: forwarder(m) for m in FORWARD.intersection(methods)}
        body.update(__slots__=(), __module__=asked("__module__", module), __doc__=asked("__doc__", doc),
                    __qualname__=qualname, **({"__hash__": None} if unhashable else {}))
        meta = RemoteContainerClass if container else RemoteClass
        try:
            cls = meta(name, bases, body)
        except TypeError:  # bases whose order the stand-ins cannot keep
            cls = meta(name, (Proxy,), body)
        type.__delattr__(cls, "__slots__")  # (as Proxy's)
        self.stand_ins[h], self.class_numbers[cls], STOOD_BY[cls] = cls, h, self
        return cls

    def proxy(self, h, described):
        """The tests' side: the stand-in instance of the program's object number `h`, one per object; a coroutine
        of the program's as a coroutine of the tests' that its process runs to its end (awaiting)."""
        cls = self.stand_in(described)
        if type(h) is not int or h < 0:
            raise ValueError("an object is a number")
        if h not in self.remotes:
            self.remotes[h] = p = object.__new__(cls)
            object.__setattr__(p, "_sandbox_ch", self)
            object.__setattr__(p, "_sandbox_h", h)
        p = self.remotes[h]
        coroutine = hasattr(type(p), "__await__") and (type(p).__module__, type(p).__name__) == ("builtins",
                                                                                                  "coroutine")
        return awaiting(p) if coroutine else p

    def stood_for(self, x):
        """The tests' side: the program's number of what a stand-in stands for (an object, or a class), or None."""
        if isinstance(x, Proxy):
            return object.__getattribute__(x, "_sandbox_h") if object.__getattribute__(x, "_sandbox_ch") is self \
                else None
        return self.class_numbers.get(x) if isinstance(x, RemoteClass) else None

