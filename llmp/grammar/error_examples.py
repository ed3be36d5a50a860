"""Malformed snippets that teach the parser what a syntax error *is*, by label.

Lark's ``UnexpectedInput.match_examples`` parses each snippet, and when an error in a user's
file stops the LALR parser in the same state as a snippet's error, the user's error gets that
snippet's label. Each label lists 3-5 snippets at the depths where the mistake usually happens
(a top-level block, a sub-block, an expression, a sweep list). The hint is printed under the
diagnostic.
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "missing '='": (
        "model m { layers 32 }",
        "model m { layers = 32  hidden 4096 }",
        "gpu g { flops { bf16 989 TFLOP/s } }",
        "train { parallel { tp 8 } }",
        "model m { moe { experts 8 } }",
    ),
    "missing value": (
        "model m { layers = }",
        "model m { layers = \n hidden = 4096 }",
        "train { parallel { tp = } }",
        "link l { bandwidth = , latency = 1 us }",
        "gpu g { flops { bf16 = } }",
    ),
    "unclosed brace": (
        "model m { layers = 32",
        "model m { layers = 32 \n hidden = 4096",
        "train { parallel { tp = 8 }",
        "gpu g { flops { bf16 = 989 TFLOP/s }",
        "model m {",
    ),
    "unit without number": (
        "gpu g { memory = GiB }",
        "link l { bandwidth = GB/s }",
        "link l { latency = 2 * us }",
        "gpu g { memory = 80 GiB GiB }",
        "gpu g { flops { bf16 = TFLOP/s } }",
    ),
    "two values": (
        "model m { hidden = 4096 4096 }",
        "link l { bandwidth = 400 GB/s 2 }",
        "train { parallel { tp = 8 8 } }",
        "model m { hidden = 4096 \"x\" }",
    ),
    "bad list": (
        "train { parallel { tp = [1, 2,, 4] } }",
        "train { parallel { tp = [1 2] } }",
        "train { parallel { tp = [] } }",
        "train { parallel { tp = [1, 2 } }",
        "parallel { tp = [1 2] }",
    ),
    "bad expression": (
        "model m { hidden = 4096 * }",
        "model m { hidden = 4096 * * 2 }",
        "model m { hidden = (4096 }",
        "model m { ffn_hidden = 4 * hidden ) }",
        "model m { hidden = 4096 / }",
    ),
    "unknown block": (
        "modle m { layers = 32 }",
        "training { global_batch = 8 }",
        "layers = 32",
        "model m { } trian { }",
        "gpu g { } 1",
    ),
    "unmatched '}'": (
        "model m { layers = 32 } }",
        "}",
        "train { parallel { tp = 8 } } }",
    ),
    "bad use": (
        "use dgx_h100",
        "use",
        "use 'dgx_h100'",
    ),
}

HINTS: dict[str, str] = {
    "missing '='": "fields are written 'name = value'",
    "missing value": "write a number, a quantity with a unit, a name, a list or 'symbol' after '='",
    "unclosed brace": "every '{' needs a matching '}'",
    "unit without number": "a unit follows a number: write e.g. '80 GiB' or '400 GB/s'",
    "two values": "a field takes one value; for a sweep write a list: [1, 2, 4]",
    "bad list": "sweep lists look like [1, 2, 4, 8]: at least one value, separated by commas",
    "bad expression": "expressions use numbers, fields, + - * / and parentheses",
    "unknown block": ("top-level blocks are use, gpu, device, link, node, cluster, model, "
                      "train and parallel"),
    "unmatched '}'": "this '}' closes no block; check the braces above it",
    "bad use": 'includes are written use "file.llmp" or use "catalog_name" (double quotes)',
}
