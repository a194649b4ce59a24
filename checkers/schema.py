"""The Spark schema of history.jsonl: the reader's half of harness/history/contract.py.

`value` is declared as the union of the shapes the delivery contract defines.
Spark's JSON reader keeps the other fields of a row when only `value` does not
fit (a nemesis op's free-form value), and marks the row in `_corrupt`; the
loader decides which of those rows are real contract violations.
"""

import pyarrow as pa
from pyspark.sql import types as T

CORRUPT = "_corrupt"

MSG = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("queue", T.StringType()),
        T.StructField("partition", T.LongType()),
        T.StructField("offset", T.LongType()),
        T.StructField("key", T.StringType()),
    ]
)

MOP = T.StructType(
    [
        T.StructField("f", T.StringType()),
        T.StructField("msgs", T.ArrayType(MSG)),
    ]
)

EFFECT = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("count", T.LongType()),
    ]
)

VALUE = T.StructType(
    [
        T.StructField("msgs", T.ArrayType(MSG)),
        T.StructField("queue", T.StringType()),
        T.StructField("mops", T.ArrayType(MOP)),
        T.StructField("effects", T.ArrayType(EFFECT)),
    ]
)

OP = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("time", T.LongType()),
        # int or "nemesis": read as text, an int becomes its decimal string.
        T.StructField("process", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField("value", VALUE),
        T.StructField("node", T.StringType()),
        T.StructField("error", T.StringType()),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

# What the contract check parses each line into (checkers/load.py). Each
# non-blank line L is read as {"a": [L, {"\u0000": 0}]}: the closing element
# is found, with its SENTINEL, only if L is exactly one JSON value (Spark
# ignores whatever follows the first value of a text). `process` is a long
# here: an int parses, "nemesis" and anything else fails (and is looked at
# again, see load.py).
SENTINEL = "\x00"

CHECK_OP = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("time", T.LongType()),
        T.StructField("process", T.LongType()),
        T.StructField("type", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField("value", VALUE),
        T.StructField("node", T.StringType()),
        T.StructField("error", T.StringType()),
        T.StructField(SENTINEL, T.LongType()),
    ]
)

CHECK_LINE = T.StructType(
    [
        T.StructField("a", T.ArrayType(CHECK_OP)),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

# The fields whose JSON type a string column cannot tell (a number reads as
# its digits): parsed again as variants, only on the few lines that need it.
STRING_FIELDS = ("process", "f", "node", "error")
TYPES_OF = T.StructType([T.StructField(k, T.VariantType()) for k in STRING_FIELDS])

# Jackson as strict as orjson, the Python reader's parser.
STRICT_JSON = {
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": CORRUPT,
    "allowComments": "false",
    "allowUnquotedFieldNames": "false",
    "allowSingleQuotes": "false",
    "allowNumericLeadingZeros": "false",
    "allowNonNumericNumbers": "false",
    "allowBackslashEscapingAnyCharacter": "false",
    "allowUnquotedControlChars": "false",
}


_SPARK_OF = {
    pa.int64(): T.LongType(),
    pa.int8(): T.ByteType(),
    pa.string(): T.StringType(),
    pa.bool_(): T.BooleanType(),
}


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of a sidecar table (harness/history/sidecar.py), given
    to the reader so that it need not open the files to infer it."""
    return T.StructType([T.StructField(f.name, _SPARK_OF[f.type]) for f in schema])
