import ArgumentParser
import MiniFlakeCommand

MiniFlakeCommand.main()
