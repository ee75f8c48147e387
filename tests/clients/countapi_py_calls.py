"""Calls every function of the PyPI `countapi` client against an edgecount at the URL given,
changing nothing in the client but its base URL, and checks each answer.

Run by tests/compat-clients.spec.ts: `python countapi_py_calls.py http://127.0.0.1:PORT NS`.
"""

import sys

import countapi
from countapi import common, create, info, set as set_module, stats, value


def main(base_url: str, ns: str) -> None:
    # The client reads its base URL from a module constant each module imported by name.
    for module in (common, create, info, set_module, stats, value):
        module.API_BASE = base_url

    made = countapi.create_counter(key="views", namespace=ns, value=5, enable_reset=True,
                                   update_lower_bound=-10, update_upper_bound=10)
    assert (made.namespace, made.key, made.value) == (ns, "views", 5), vars(made)

    assert countapi.hit_counter("views", ns).value == 6
    assert countapi.get_value("views", ns).value == 6
    assert countapi.update_counter(10, "views", ns).value == 16
    changed = countapi.set_value(100, "views", ns)
    assert (changed.old_value, changed.value) == (16, 100), vars(changed)

    details = countapi.get_info("views", ns)
    assert (details.namespace, details.key, details.value) == (ns, "views", 100)
    assert details.enable_reset is True
    assert (details.update_lower_bound, details.update_upper_bound) == (-10, 10)
    assert details.ttl > 0 and details.created_at.year >= 2024

    summary = countapi.get_stats()
    assert summary.keys_created >= 1 and summary.version.startswith("edgecount")

    # Refusals surface as the client's own error, with the status.
    for call, status in [
        (lambda: countapi.update_counter(11, "views", ns), 403),
        (lambda: countapi.get_value("missing", ns), 404),
        (lambda: countapi.create_counter(key="views", namespace=ns), 409),
    ]:
        try:
            call()
        except common.NotOKError as error:
            assert f"[status {status}]" in str(error), error
        else:
            raise AssertionError(f"expected status {status}")

    countapi.hit_counter("plain", ns)
    try:
        countapi.set_value(1, "plain", ns)
    except common.NotOKError as error:
        assert "[status 403]" in str(error), error
    else:
        raise AssertionError("a counter made by /hit must refuse /set")
    print("countapi (PyPI) calls: ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
