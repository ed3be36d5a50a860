"""What a spec is, apart from the language that writes it: the floor every layer above reads.

The typed :class:`~llmp.spec.spec.Spec` and its blocks (``spec.py``; the model block in
``model.py``), the field schema the grammar, the resolver, the symbols and the sweeps are driven
by (``schema.py``), each field's physical range (``ranges.py``), the values a field may hold
(``values.py``), one SymPy symbol per numeric field (``symbols.py``), reading and replacing a field
by its dotted path (``specpath.py``), the min/max/ceil algebra that works on numbers and on
expressions alike (``algebra.py``, ``sympy_functions.py``) and a spec as plain data
(``serialize.py``). The language
(:mod:`llmp.dsl`) builds a Spec; the stacks, the analytic model, the residuals and composition
read it. None of them is imported from here: this floor imports only the ground (``errors``,
``units``, ``sym``, ``recent``) and the hardware types (docs/architecture.md, "Floors").
"""
