"""ForecastInputs: past, future and static inputs as one pytree (in that order)."""

import jax
import numpy as np

from stacklstm.inputs import ForecastInputs


def test_forecast_inputs_is_a_pytree_of_its_three_parts_in_order():
    past, future, static = np.ones((2, 5, 3)), np.zeros((2, 4, 0)), np.full((2, 1), 7.0)
    inputs = ForecastInputs(past, future, static)
    leaves, tree = jax.tree.flatten(inputs)
    assert [leaf.shape for leaf in leaves] == [(2, 5, 3), (2, 4, 0), (2, 1)]
    back = jax.tree.unflatten(tree, leaves)
    assert isinstance(back, ForecastInputs) and back.static is static
    doubled = jax.tree.map(lambda a: 2 * a, inputs)
    assert doubled._fields == ("past", "future", "static")
    np.testing.assert_array_equal(doubled.static, [[14.0], [14.0]])
    # a batch slice of every part: what the training step gathers per batch
    row = jax.tree.map(lambda a: a[1:], inputs)
    assert (row.past.shape, row.future.shape, row.static.shape) == ((1, 5, 3), (1, 4, 0), (1, 1))
