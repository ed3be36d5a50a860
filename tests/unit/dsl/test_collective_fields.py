"""The link fields NCCL's cost model reads: transport, nvls, nvls_efficiency, in_network_reduction
(values, defaults by role, clear errors), and the scale-up domain as the catalog trays use it."""

from __future__ import annotations

import pytest
from unit.dsl.test_calibration_fields import spec_with

from llmp.analytic.collectives import Links
from llmp.dsl import catalog
from llmp.errors import SpecError
from llmp.hardware.spec import Transport


def test_defaults_leave_the_transport_to_the_links_role_and_no_switch_features():
    spec = spec_with()
    intra = spec.cluster.node.intra
    assert intra.transport is None and not intra.nvls and intra.nvls_efficiency is None
    links = Links.of(spec)
    assert (links.intra_transport, links.inter_transport) == (Transport.NVLINK, Transport.NET)
    assert not links.nvls and not links.collnet


def test_switch_features_and_transport_are_read():
    spec = spec_with("transport = pci  nvls = true  nvls_efficiency = 0.7  in_network_reduction = true")
    intra = spec.cluster.node.intra
    assert (intra.transport, intra.nvls, intra.nvls_efficiency, intra.in_network_reduction) == (
        Transport.PCI, True, pytest.approx(0.7), True)


@pytest.mark.parametrize("text,label,words", [
    ("transport = ethernet", "unknown value", "expected one of nvlink, pci, net, host"),
    ("nvls = yes", "wrong type", "expects true or false, got 'yes'"),
    ("nvls_efficiency = 1.5", "bad value", "above 0 and at most 1"),
    ("nvls_efficiency = 0.7 GB/s", "wrong unit", "nvls_efficiency"),
])
def test_bad_values_are_clear_errors(text, label, words):
    with pytest.raises(SpecError) as err:
        spec_with(text)
    assert err.value.label == label and words in str(err.value)


@pytest.mark.parametrize("node", ["gb200_nvl72_tray", "gb300_nvl72_tray"])
def test_an_nvl72_tray_is_a_four_gpu_node_in_a_72_gpu_nvlink_domain(node):
    tray = catalog.node(node)
    assert (tray.gpus_per_node, tray.domain) == (4, 72) and tray.intra.nvls
    # the NICs stay per tray: each GPU's share is its tray's injection over 4
    assert Links.between(tray, tray.inter).rail_bandwidth == pytest.approx(tray.inter.bandwidth
                                                                         * tray.inter.efficiency / 4)
