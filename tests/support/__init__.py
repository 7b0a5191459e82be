"""What the project's tests share: fake servers, run builders, stores, paths."""
