"""The fault drill's pure parts (netregress_postrun.drill)."""
import pytest

from netregress_postrun import drill


def test_a_throttled_link_keeps_the_fabric_shaping_but_its_rate():
    spec = drill.VC['VC_GIGE_SHAPING']                       # the vcluster's own gige shaping
    throttled = drill.with_rate(spec, '700mbit')
    assert ' rate 700mbit ' in f' {throttled} '
    assert throttled.replace('700mbit', 'X') == drill.with_rate(spec, 'X')
    assert drill.with_rate('tbf rate 1gbit burst 4mb peakrate 2gbit mtu 64kb', '700mbit') \
        == 'tbf rate 700mbit burst 4mb peakrate 2gbit mtu 64kb'      # the peak rate is not the rate


def test_a_shaping_without_a_rate_is_named():
    with pytest.raises(ValueError, match='names no rate'):
        drill.with_rate('netem delay 1ms', '700mbit')
