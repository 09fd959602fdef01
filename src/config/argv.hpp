// The three programs' argv through Boost.Program_options: one command-line style (options spelled in
// full, never guessed; --name=VALUE or --name VALUE; one-letter short switches; -- ends the options)
// and the names its errors carry. What an option means, its type and range stay in the option tables
// (config/options.cpp, the flag tables of ztok and zckpt). Private to src/config.
#pragma once

#include <boost/program_options.hpp>  // the device bundle carries this header's closure only
#include <string>

namespace zt::config::argv {
namespace po = boost::program_options;

// argv[first, argc) as Boost splits it by `desc`, in the order given: options (string_key their name)
// and free arguments (string_key empty). Throws po::error: an unknown, misspelt or abbreviated name,
// a missing value, a value given to a switch.
po::parsed_options split(const po::options_description& desc, int argc, const char* const* argv, int first = 1);

// The text one occurrence gives its option, as desc's value semantic reads it: the value, "" for a
// switch, the implicit value of an option given bare.
std::string text_of(const po::options_description& desc, const po::option& occurrence);

// An argument as typed, without its value ("--optim.lrr=3" -> "--optim.lrr"), and the name in it
// ("optim.lrr"; "-x" -> "x").
std::string without_value(const std::string& token);
std::string name_in(const std::string& token);

}  // namespace zt::config::argv
