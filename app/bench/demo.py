"""The demo repository and answers behind `make screenshots`, the snapshot tests and the
key-flow tests: a small calculator and what a model answers when asked for type hints."""

CALC = '''"""A tiny calculator."""


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b


def main():
    print(add(1, 2), sub(3, 1), mul(2, 3), div(8, 2))


if __name__ == "__main__":
    main()
'''

# A model's answer to "add type hints" for CALC: three search/replace blocks.
CALC_ANSWER = '''I'll add type hints and guard against division by zero.

calc.py
```python
<<<<<<< SEARCH
def add(a, b):
    return a + b
=======
def add(a: float, b: float) -> float:
    return a + b
>>>>>>> REPLACE
```

calc.py
```python
<<<<<<< SEARCH
def div(a, b):
    return a / b
=======
def div(a: float, b: float) -> float:
    if b == 0:
        raise ZeroDivisionError("b must not be zero")
    return a / b
>>>>>>> REPLACE
```

calc.py
```python
<<<<<<< SEARCH
def main():
    print(add(1, 2), sub(3, 1), mul(2, 3), div(8, 2))
=======
def main() -> None:
    print(add(1, 2), sub(3, 1), mul(2, 3), div(8, 2))
>>>>>>> REPLACE
```

The division now fails loudly instead of returning inf.
'''

# What a second answer (after a redirect or a follow-up) says.
SUB_ANSWER = '''Now sub, as asked.

calc.py
```python
<<<<<<< SEARCH
def sub(a, b):
    return a - b
=======
def sub(a: float, b: float) -> float:
    return a - b
>>>>>>> REPLACE
```
'''


def _sr(old: str, new: str) -> str:
    return f"calc.py\n```python\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```\n"


_ADD, _MUL, _DIV = ("def add(a, b):\n    return a + b\n", "def mul(a, b):\n    return a * b\n",
                    "def div(a, b):\n    return a / b\n")

# Three models' answers to "type the calculator" (the variants screenshot and benchmark):
# one types with int, one with float and guards div, one only documents div.
VARIANT_ANSWERS = [
    "Integers are what the calculator is used with: I'll type add and mul with int.\n\n"
    + _sr(_ADD, "def add(a: int, b: int) -> int:\n    return a + b\n")
    + _sr(_MUL, "def mul(a: int, b: int) -> int:\n    return a * b\n"),
    "Floats cover every caller; div also gets a guard against zero.\n\n"
    + _sr(_ADD, "def add(a: float, b: float) -> float:\n    return a + b\n")
    + _sr(_DIV, "def div(a: float, b: float) -> float:\n    if b == 0:\n"
          "        raise ZeroDivisionError(\"b must not be zero\")\n    return a / b\n"),
    "The smallest change: say what div does with zero.\n\n"
    + _sr(_DIV, "def div(a, b):\n    \"\"\"a / b; raises ZeroDivisionError when b is 0.\"\"\"\n"
          "    return a / b\n"),
]
