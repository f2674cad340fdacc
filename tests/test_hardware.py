"""The measured bandwidth is cached in the data directory, and a directory that cannot be written costs nothing."""

from playground import hardware


def fake_gpu(monkeypatch, rate: float) -> None:
    monkeypatch.setattr(hardware.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(hardware.torch.cuda, "get_device_name", lambda index=0: "Test GPU")
    monkeypatch.setattr(hardware, "_copy_bandwidth_gb_s", lambda: rate)


def test_bandwidth_is_measured_once_and_kept(monkeypatch):
    fake_gpu(monkeypatch, 4200.04)
    assert hardware.memory_bandwidth_gb_s() == 4200.0
    fake_gpu(monkeypatch, 1.0)  # a second call reads the file, not the device
    assert hardware.memory_bandwidth_gb_s() == 4200.0


def test_an_uncreatable_data_dir_still_gives_the_figure(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PLAYGROUND_DATA_DIR", str(blocker / "data"))
    fake_gpu(monkeypatch, 3000.0)
    assert hardware.memory_bandwidth_gb_s() == 3000.0
