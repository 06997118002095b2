// Intentionally empty until this stage has sources.
namespace mlajit {}
