"""Independent CycloneDX validator for the conformance tests: cyclonedx-python-lib (PyPI), the
CycloneDX project's Python library, with its bundled official schema in strict mode. Installed at
test-install time into a cached venv by hack/ensure-verifiers.sh.

Usage: cdx_validate.py <file>...
For each file prints `valid <file>` or `invalid <file>: <first line of the validation error>`;
exits 0 when every file is valid, 1 otherwise.
"""
import sys

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator


def main():
    validator = JsonStrictValidator(SchemaVersion.V1_7)
    ok = True
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            error = validator.validate_str(f.read())
        if error is None:
            print(f"valid {path}")
        else:
            ok = False
            first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            print(f"invalid {path}: {first}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
