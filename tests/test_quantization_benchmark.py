"""The quantization benchmark keeps going past a setting the config refuses, and says why in its row."""

import json

from benchmarks.quantization import main


def test_a_refused_setting_is_a_row_and_the_rest_still_run(tmp_path, capsys):
    out = tmp_path / "quant.json"
    main(["--quant", "int4-gemlite,int8", "--dtype", "fp32", "--device", "cpu", "--new-tokens", "4",
          "--repeats", "1", "--output", str(out)])
    table = {row[1]: row for row in json.loads(out.read_text())["table"]}
    assert table["int4-gemlite"][2].startswith("refused: quant=int4-gemlite kernels take only fp16")
    assert table["none"][3] == "1.00x" and table["int8"][3].endswith("x")  # the setting after it was measured
    assert "refused: quant=int4-gemlite" in capsys.readouterr().out
